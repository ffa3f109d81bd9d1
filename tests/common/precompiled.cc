// The object the tests' precompiled header is built with (tests/CMakeLists.txt): GoogleTest,
// nlohmann-json and fmt, parsed once for every test binary instead of once per test file.
