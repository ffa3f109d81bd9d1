// The HTML page of a diff (nanotrace/diff.hpp), in the style of the report
// (nanotrace/report.hpp): the headline, the ranked findings, and per subject a table of its
// metrics with their intervals and the latency histograms of A and B side by side on the
// same log scale. Self-contained: inline CSS and SVG, no script, no external resource.
#pragma once

#include <string>

#include "nanotrace/diff.hpp"
#include "nanotrace/status.hpp"

namespace nanotrace {

// write_diff_html - writes the page to path (a new file, mode 0600).
// Errors: kIoError (the file cannot be written), kAlreadyExists as the report's output.
Status write_diff_html(const DiffReport& report, const std::string& path);

}  // namespace nanotrace
