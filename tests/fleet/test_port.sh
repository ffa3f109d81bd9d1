# Sourced by the fleet tests: the TCP ports their servers listen on.
#
# test_port SEED SPAN: a port P such that P .. P+SPAN all lie in 20000-31999, below Linux's
# ephemeral range (32768-60999 by default), from which the kernel picks the local port of
# every outgoing connection on the machine: a listening port chosen there can be taken by any
# client at any moment (fleet_local once found its metrics port in use under a loaded run).
test_port() {
  echo $((20000 + $1 % (12000 - $2)))
}
