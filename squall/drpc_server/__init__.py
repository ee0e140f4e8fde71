"""The DRPC server daemon, ``squall drpc`` (Storm's DRPC server): request queues per
function (squall.drpc.requests) behind Storm's HTTP form, on nimbus's TLS and tokens
(squall.httpd's server and gate), and the topologies' invocations authenticated by their
own credentials (squall.drpc_server.invokers).  docs/drpc.md says how to run and call it.
"""
