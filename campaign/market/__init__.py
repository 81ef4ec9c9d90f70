"""The built-in MTurk-compatible marketplace (server, worker site, fault injection) and the campaign's
client for any marketplace (`client.make_client`). See README_SECTION.md for how to run it and how it differs."""
