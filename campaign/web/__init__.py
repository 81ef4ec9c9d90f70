"""HTTP plumbing shared by the servers that face people (the marketplace's two origins and the Prolific
emulator): a request/response model the applications are written against (`request.py`), an ASGI
adapter that turns one into the other (`asgi.py`) and the uvicorn server with the guards a public
server needs (`server.py`). See docs/http-server.md."""
