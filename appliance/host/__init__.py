"""The clinic host (``appliance serve``): one machine serving the model and the MCP servers to
the terminals on the clinic network.

Modules: ``serve`` (starts the model and the three servers, and the record server's host-side
safety gate), ``model_gate`` (the key-checking front of the model server).
"""
