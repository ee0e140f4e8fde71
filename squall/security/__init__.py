"""Squall's secure mode: who may talk to the cluster, and how they prove it.

* :mod:`.keyring` - the cluster keyring (0600): API users' token hashes, the
  client identity of whoever holds the file, ZooKeeper's digest credentials and
  the dev cluster's CA and nimbus certificate.
* :mod:`.tls` - the CA and certificates, and the ssl contexts of nimbus and its clients.
* :mod:`.authz` - Storm's authorizer shape (``nimbus.admins``, ``topology.users``, ...).
* :mod:`.redact` - secrets in topology configs, hidden in every answer and log.
* :mod:`.curve` - the per-topology CURVE keypair the workers share.
* :mod:`.logtokens` - the short-lived tokens nimbus mints for one user and one logviewer.

Pure code: no sockets, no ZooKeeper; the daemons' shells use it.
"""
