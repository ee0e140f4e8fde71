"""The wire between workers: the codec, the frames a worker accepts, the transports
(in-process and ZeroMQ) and the transfer threads."""
