"""Leases: which daemon works which campaign when several share one PostgreSQL store.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-23 13:05:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0002'
down_revision: str | None = '0001'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('leases',
    sa.Column('campaign', sa.String(), nullable=False),
    sa.Column('holder', sa.String(), nullable=False),
    sa.Column('expires_at', sa.Float(), nullable=False),
    sa.Column('acquired_at', sa.Float(), nullable=False),
    sa.PrimaryKeyConstraint('campaign')
    )


def downgrade() -> None:
    op.drop_table('leases')
