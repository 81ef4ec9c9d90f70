"""What many tests need, in one place: the repository's paths, a CLI runner (`campaign` as a subprocess
with the crash variable scrubbed), a spec builder, and a real terminal (pty) to run commands on."""
