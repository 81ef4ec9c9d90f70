"""Prolific webhooks: the subscription's journal and the marks the task site writes for each verified
delivery (which submission changed), read by the Prolific campaigns' sweeps.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-26 21:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0005'
down_revision: str | None = '0004'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('prolific_hooks',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('workspace_id', sa.String(), nullable=False),
    sa.Column('event_type', sa.String(), nullable=False),
    sa.Column('target_url', sa.String(), nullable=False),
    sa.Column('subscription_id', sa.String(), nullable=True),
    sa.Column('state', sa.String(), nullable=False),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('workspace_id', 'event_type', 'target_url')
    )
    op.create_table('prolific_hook_marks',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('event_id', sa.String(), nullable=False),
    sa.Column('submission_id', sa.String(), nullable=False),
    sa.Column('study_id', sa.String(), nullable=True),
    sa.Column('status', sa.String(), nullable=False),
    sa.Column('sent_at', sa.Integer(), nullable=False),
    sa.Column('received_at', sa.Float(), nullable=False),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('event_id')
    )


def downgrade() -> None:
    # Nothing here is money or a decision: the marks only say what to look at again, and a subscription
    # without its journal is found again on Prolific (listed by target URL) at the next start.
    op.drop_table('prolific_hook_marks')
    op.drop_table('prolific_hooks')
