"""Indexes for the statements every pass runs, so that each costs what the pass's new work costs rather
than what the tables hold (docs/scale.md, "Per-pass statements"):

- `ix_hits_campaign_pending` (campaign, id) over the HITs still to post (`draft`, `posting`) only: the
  posting step's read of a campaign's drafts, oldest first (`campaign.steps.post.post_pending`). Without
  it PostgreSQL's generic plan for the prepared statement walked the primary key through every HIT of
  every campaign, looking for drafts that mostly were not there.
- `ix_assignments_campaign_hit_status` (campaign, hit_key, status): the close step's count of each open
  HIT's decided answers (`close_finished_hits`); `ix_assignments_hit_key` alone read every campaign's
  answers to HITs of the same key.
- `ix_assignments_campaign_stage_status` (campaign, stage, status): the quality pass's count of a
  stage's answers (`quality_pass`), read from the index alone.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-28 18:45:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0006'
down_revision: str | None = '0005'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

PENDING = sa.text("status IN ('draft', 'posting')")


def upgrade() -> None:
    # if_not_exists: a store written before stores carried a version is made by `create_all` and stamped
    # as the baseline; one made by a release whose models held these indexes has them already
    op.create_index('ix_hits_campaign_pending', 'hits', ['campaign', 'id'], unique=False, if_not_exists=True,
                    postgresql_where=PENDING, sqlite_where=PENDING)
    op.create_index('ix_assignments_campaign_hit_status', 'assignments', ['campaign', 'hit_key', 'status'], unique=False,
                    if_not_exists=True)
    op.create_index('ix_assignments_campaign_stage_status', 'assignments', ['campaign', 'stage', 'status'], unique=False,
                    if_not_exists=True)


def downgrade() -> None:
    # indexes only: nothing stored is lost
    op.drop_index('ix_assignments_campaign_stage_status', table_name='assignments')
    op.drop_index('ix_assignments_campaign_hit_status', table_name='assignments')
    op.drop_index('ix_hits_campaign_pending', table_name='hits')
