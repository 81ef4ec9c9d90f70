"""Alembic migrations of the state store (`campaign.store`).

Shipped as a package, so an installed wheel carries them; `campaign.store` runs them itself on open (no
alembic.ini needed). A schema change is a new revision in `versions/` (`python -m campaign.migrations
revision -m "what changed"` autogenerates one from the models) and never an edit of an older one.
"""
