"""campaign: turn YAML campaign specs into crowd annotation HITs, collect, check and aggregate them."""

__version__ = "0.1.0"
