"""The dashboard's WebSockets: the consumer (transport), its session checks and the socket URL
map.  Sockets call services; they hold no logic."""
