"""Loaders for the real crowd data sets in ../shared/data (absent on a fresh clone; see campaign.paths)."""
