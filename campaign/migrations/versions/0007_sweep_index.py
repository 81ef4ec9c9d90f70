"""`ix_hits_campaign_status_id` (campaign, status, id): collect's sweep of a campaign's open HITs after its
cursor (`campaign.steps.collect.open_hits_after`). Under the generic plan PostgreSQL gives a daemon's prepared
statements, "the first 200 open HITs after the cursor, in id order" walked the primary key through every
campaign's HITs and filtered (at 470,000 propositions, 14.5 ms a page and the store's costliest statement:
152 s of a 67-minute run). With the campaign, the status and the id in one index (and the order and limit
kept outside the choice of rows), the rows are one range of it.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-29 14:20:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = '0007'
down_revision: str | None = '0006'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # if_not_exists: a store made by `create_all` from models holding the index has it already
    op.create_index('ix_hits_campaign_status_id', 'hits', ['campaign', 'status', 'id'], unique=False, if_not_exists=True)


def downgrade() -> None:
    # an index only: nothing stored is lost
    op.drop_index('ix_hits_campaign_status_id', table_name='hits')
