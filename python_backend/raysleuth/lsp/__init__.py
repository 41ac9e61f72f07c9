"""`raysleuth lsp`: a language server (pygls, stdio) for code that runs on Ray.

Static parts (remote definitions, leftover breakpoints, Ray's anti-patterns) need no cluster;
live parts (lens counts, hovers, rank checks) read the broker over HTTP + SSE, as a client.
Never imports the broker or the agent, and never writes to stdout (it is the protocol).
"""
