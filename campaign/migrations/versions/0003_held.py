"""Held rows: what a step failed on, quarantined until the operator settles it (`campaign held`, `campaign decide`).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-26 09:45:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0003'
down_revision: str | None = '0002'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('held',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('campaign', sa.String(), nullable=False),
    sa.Column('row_kind', sa.String(), nullable=False),
    sa.Column('row_key', sa.String(), nullable=False),
    sa.Column('step', sa.String(), nullable=False),
    sa.Column('error', sa.String(), nullable=False),
    sa.Column('hit_key', sa.String(), nullable=True),
    sa.Column('worker_id', sa.String(), nullable=True),
    sa.Column('held_at', sa.Float(), nullable=False),
    sa.Column('status', sa.String(), nullable=False),
    sa.Column('decision', sa.String(), nullable=True),
    sa.Column('message', sa.String(), nullable=True),
    sa.Column('decided_at', sa.Float(), nullable=True),
    sa.Column('settled_at', sa.Float(), nullable=True),
    sa.Column('outcome', sa.String(), nullable=True),
    sa.Column('data', sa.String(), nullable=True),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('campaign', 'row_kind', 'row_key')
    )
    op.create_index('ix_held_campaign_status', 'held', ['campaign', 'status'], unique=False)
    op.create_index(op.f('ix_held_campaign'), 'held', ['campaign'], unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_held_campaign'), table_name='held')
    op.drop_index('ix_held_campaign_status', table_name='held')
    op.drop_table('held')
