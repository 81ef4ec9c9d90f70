"""The built-in MTurk-compatible marketplace (server, worker site, fault injection) and the campaign's
client for any marketplace (`client.make_client`). See docs/marketplace.md for how to run it and how it differs."""
