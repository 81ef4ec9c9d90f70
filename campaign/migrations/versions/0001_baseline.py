"""Baseline: the schema `create_all` wrote before stores carried a version.

A new store is created through it; a store written before (no `alembic_version` table) is stamped
with it instead, as it already has these tables.

Revision ID: 0001
Revises: (none)
Create Date: 2026-11-23 12:03:28.740184
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0001'
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('assignments',
    sa.Column('assignment_id', sa.String(), nullable=False),
    sa.Column('campaign', sa.String(), nullable=False),
    sa.Column('stage', sa.String(), nullable=False),
    sa.Column('hit_key', sa.String(), nullable=False),
    sa.Column('hit_id', sa.String(), nullable=False),
    sa.Column('worker_id', sa.String(), nullable=False),
    sa.Column('status', sa.String(), nullable=False),
    sa.Column('answer_xml', sa.String(), nullable=False),
    sa.Column('valid', sa.Boolean(), nullable=False),
    sa.Column('error', sa.String(), nullable=True),
    sa.Column('accept_time', sa.Float(), nullable=True),
    sa.Column('submit_time', sa.Float(), nullable=True),
    sa.Column('collected_at', sa.Float(), nullable=False),
    sa.Column('decided_at', sa.Float(), nullable=True),
    sa.Column('feedback', sa.String(), nullable=True),
    sa.PrimaryKeyConstraint('assignment_id')
    )
    with op.batch_alter_table('assignments', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_assignments_campaign'), ['campaign'], unique=False)
        batch_op.create_index('ix_assignments_campaign_collected', ['campaign', 'collected_at'], unique=False)
        batch_op.create_index('ix_assignments_campaign_status', ['campaign', 'status', 'valid'], unique=False)
        batch_op.create_index(batch_op.f('ix_assignments_hit_key'), ['hit_key'], unique=False)
        batch_op.create_index(batch_op.f('ix_assignments_status'), ['status'], unique=False)
        batch_op.create_index(batch_op.f('ix_assignments_worker_id'), ['worker_id'], unique=False)

    op.create_table('campaigns',
    sa.Column('name', sa.String(), nullable=False),
    sa.Column('fingerprint', sa.String(), nullable=False),
    sa.Column('spec_json', sa.String(), nullable=False),
    sa.Column('status', sa.String(), nullable=False),
    sa.Column('seed', sa.Integer(), nullable=False),
    sa.Column('budget', sa.String(), nullable=False),
    sa.Column('created_at', sa.Float(), nullable=False),
    sa.Column('finished_at', sa.Float(), nullable=True),
    sa.PrimaryKeyConstraint('name')
    )
    op.create_table('events',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('campaign', sa.String(), nullable=False),
    sa.Column('ts', sa.Float(), nullable=False),
    sa.Column('level', sa.String(), nullable=False),
    sa.Column('kind', sa.String(), nullable=False),
    sa.Column('subject', sa.String(), nullable=True),
    sa.Column('message', sa.String(), nullable=False),
    sa.Column('data', sa.String(), nullable=True),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('events', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_events_campaign'), ['campaign'], unique=False)

    op.create_table('hits',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('campaign', sa.String(), nullable=False),
    sa.Column('stage', sa.String(), nullable=False),
    sa.Column('hit_key', sa.String(), nullable=False),
    sa.Column('batch', sa.Integer(), nullable=False),
    sa.Column('item_keys', sa.String(), nullable=False),
    sa.Column('annotation', sa.String(), nullable=False),
    sa.Column('token', sa.String(), nullable=False),
    sa.Column('token_attempt', sa.Integer(), nullable=False),
    sa.Column('status', sa.String(), nullable=False),
    sa.Column('reward', sa.String(), nullable=False),
    sa.Column('assignments', sa.Integer(), nullable=False),
    sa.Column('reserved', sa.String(), nullable=False),
    sa.Column('hit_id', sa.String(), nullable=True),
    sa.Column('hit_type_id', sa.String(), nullable=True),
    sa.Column('posting_started_at', sa.Float(), nullable=True),
    sa.Column('posted_at', sa.Float(), nullable=True),
    sa.Column('expires_at', sa.Float(), nullable=True),
    sa.Column('closed_at', sa.Float(), nullable=True),
    sa.Column('error', sa.String(), nullable=True),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('campaign', 'hit_key')
    )
    with op.batch_alter_table('hits', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_hits_campaign'), ['campaign'], unique=False)
        batch_op.create_index('ix_hits_campaign_status', ['campaign', 'status', 'stage'], unique=False)
        batch_op.create_index(batch_op.f('ix_hits_hit_id'), ['hit_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_hits_status'), ['status'], unique=False)

    op.create_table('items',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('campaign', sa.String(), nullable=False),
    sa.Column('item_key', sa.String(), nullable=False),
    sa.Column('text', sa.String(), nullable=False),
    sa.Column('doc', sa.String(), nullable=True),
    sa.Column('position', sa.Integer(), nullable=False),
    sa.Column('is_trap', sa.Boolean(), nullable=False),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('campaign', 'item_key')
    )
    with op.batch_alter_table('items', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_items_campaign'), ['campaign'], unique=False)

    op.create_table('judgments',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('campaign', sa.String(), nullable=False),
    sa.Column('stage', sa.String(), nullable=False),
    sa.Column('assignment_id', sa.String(), nullable=False),
    sa.Column('worker_id', sa.String(), nullable=False),
    sa.Column('item_key', sa.String(), nullable=False),
    sa.Column('value', sa.Float(), nullable=False),
    sa.Column('extra', sa.String(), nullable=True),
    sa.Column('excluded', sa.Boolean(), nullable=False),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('assignment_id', 'item_key')
    )
    with op.batch_alter_table('judgments', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_judgments_assignment_id'), ['assignment_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_judgments_campaign'), ['campaign'], unique=False)
        batch_op.create_index('ix_judgments_campaign_excluded', ['campaign', 'excluded'], unique=False)
        batch_op.create_index(batch_op.f('ix_judgments_worker_id'), ['worker_id'], unique=False)

    op.create_table('kv',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('campaign', sa.String(), nullable=False),
    sa.Column('key', sa.String(), nullable=False),
    sa.Column('value', sa.String(), nullable=False),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('campaign', 'key')
    )
    with op.batch_alter_table('kv', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_kv_campaign'), ['campaign'], unique=False)

    op.create_table('ledger',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('campaign', sa.String(), nullable=False),
    sa.Column('ref', sa.String(), nullable=False),
    sa.Column('kind', sa.String(), nullable=False),
    sa.Column('amount', sa.String(), nullable=False),
    sa.Column('fee', sa.String(), nullable=False),
    sa.Column('hit_key', sa.String(), nullable=True),
    sa.Column('assignment_id', sa.String(), nullable=True),
    sa.Column('created_at', sa.Float(), nullable=False),
    sa.Column('note', sa.String(), nullable=True),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('campaign', 'ref')
    )
    with op.batch_alter_table('ledger', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_ledger_campaign'), ['campaign'], unique=False)
        batch_op.create_index('ix_ledger_campaign_hit', ['campaign', 'hit_key'], unique=False)
        batch_op.create_index('ix_ledger_campaign_kind', ['campaign', 'kind', 'amount', 'fee'], unique=False)

    op.create_table('workers',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('campaign', sa.String(), nullable=False),
    sa.Column('worker_id', sa.String(), nullable=False),
    sa.Column('first_seen', sa.Float(), nullable=False),
    sa.Column('assignments', sa.Integer(), nullable=False),
    sa.Column('excluded', sa.Boolean(), nullable=False),
    sa.Column('blocked', sa.Boolean(), nullable=False),
    sa.Column('reason', sa.String(), nullable=True),
    sa.Column('evidence', sa.String(), nullable=True),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('campaign', 'worker_id')
    )
    with op.batch_alter_table('workers', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_workers_campaign'), ['campaign'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('workers', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_workers_campaign'))

    op.drop_table('workers')
    with op.batch_alter_table('ledger', schema=None) as batch_op:
        batch_op.drop_index('ix_ledger_campaign_kind')
        batch_op.drop_index('ix_ledger_campaign_hit')
        batch_op.drop_index(batch_op.f('ix_ledger_campaign'))

    op.drop_table('ledger')
    with op.batch_alter_table('kv', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_kv_campaign'))

    op.drop_table('kv')
    with op.batch_alter_table('judgments', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_judgments_worker_id'))
        batch_op.drop_index('ix_judgments_campaign_excluded')
        batch_op.drop_index(batch_op.f('ix_judgments_campaign'))
        batch_op.drop_index(batch_op.f('ix_judgments_assignment_id'))

    op.drop_table('judgments')
    with op.batch_alter_table('items', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_items_campaign'))

    op.drop_table('items')
    with op.batch_alter_table('hits', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_hits_status'))
        batch_op.drop_index(batch_op.f('ix_hits_hit_id'))
        batch_op.drop_index('ix_hits_campaign_status')
        batch_op.drop_index(batch_op.f('ix_hits_campaign'))

    op.drop_table('hits')
    with op.batch_alter_table('events', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_events_campaign'))

    op.drop_table('events')
    op.drop_table('campaigns')
    with op.batch_alter_table('assignments', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_assignments_worker_id'))
        batch_op.drop_index(batch_op.f('ix_assignments_status'))
        batch_op.drop_index(batch_op.f('ix_assignments_hit_key'))
        batch_op.drop_index('ix_assignments_campaign_status')
        batch_op.drop_index('ix_assignments_campaign_collected')
        batch_op.drop_index(batch_op.f('ix_assignments_campaign'))

    op.drop_table('assignments')
