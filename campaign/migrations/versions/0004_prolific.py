"""The Prolific adapter's journal in the store: its studies, decisions, bonuses, posted HITs, HIT types
and verdicts, per campaign, so that a Prolific campaign resumes from the store alone (and can move
between daemons sharing a PostgreSQL store).

The releases before kept them in two SQLite files per campaign beside the store; the upgrade reads
those of every campaign in the store, from the state folder the store was opened with, in the same
transaction (`campaign.migrations.prolific_files`). The files are left as they were.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-26 18:53:54
"""

from collections.abc import Sequence
from pathlib import Path

import sqlalchemy as sa
from alembic import context, op

from campaign.migrations.prolific_files import import_files

revision: str = '0004'
down_revision: str | None = '0003'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('prolific_bonuses',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('campaign', sa.String(), nullable=False),
    sa.Column('key', sa.String(), nullable=False),
    sa.Column('study_id', sa.String(), nullable=False),
    sa.Column('submission_id', sa.String(), nullable=False),
    sa.Column('cents', sa.Integer(), nullable=False),
    sa.Column('batch_id', sa.String(), nullable=True),
    sa.Column('state', sa.String(), nullable=False),
    sa.Column('checking_since', sa.Float(), nullable=True),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('campaign', 'key')
    )
    with op.batch_alter_table('prolific_bonuses', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_prolific_bonuses_campaign'), ['campaign'], unique=False)
        batch_op.create_index('ix_prolific_bonuses_campaign_submission', ['campaign', 'submission_id'], unique=False)

    op.create_table('prolific_decisions',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('campaign', sa.String(), nullable=False),
    sa.Column('submission_id', sa.String(), nullable=False),
    sa.Column('action', sa.String(), nullable=False),
    sa.Column('state', sa.String(), nullable=False),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('campaign', 'submission_id')
    )
    with op.batch_alter_table('prolific_decisions', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_prolific_decisions_campaign'), ['campaign'], unique=False)

    op.create_table('prolific_hit_types',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('campaign', sa.String(), nullable=False),
    sa.Column('type_id', sa.String(), nullable=False),
    sa.Column('title', sa.String(), nullable=False),
    sa.Column('description', sa.String(), nullable=False),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('campaign', 'type_id')
    )
    with op.batch_alter_table('prolific_hit_types', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_prolific_hit_types_campaign'), ['campaign'], unique=False)

    op.create_table('prolific_posted',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('campaign', sa.String(), nullable=False),
    sa.Column('hit_id', sa.String(), nullable=False),
    sa.Column('type_id', sa.String(), nullable=False),
    sa.Column('assignments', sa.Integer(), nullable=False),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('campaign', 'hit_id')
    )
    with op.batch_alter_table('prolific_posted', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_prolific_posted_campaign'), ['campaign'], unique=False)
        batch_op.create_index('ix_prolific_posted_campaign_type', ['campaign', 'type_id'], unique=False)

    op.create_table('prolific_studies',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('campaign', sa.String(), nullable=False),
    sa.Column('key', sa.String(), nullable=False),
    sa.Column('internal_name', sa.String(), nullable=False),
    sa.Column('completion_code', sa.String(), nullable=False),
    sa.Column('study_id', sa.String(), nullable=True),
    sa.Column('state', sa.String(), nullable=False),
    sa.Column('places', sa.Integer(), nullable=False),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('campaign', 'key'),
    sa.UniqueConstraint('internal_name')
    )
    with op.batch_alter_table('prolific_studies', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_prolific_studies_campaign'), ['campaign'], unique=False)

    op.create_table('prolific_verdicts',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('campaign', sa.String(), nullable=False),
    sa.Column('assignment_id', sa.String(), nullable=False),
    sa.Column('decision', sa.String(), nullable=False),
    sa.Column('reason', sa.String(), nullable=False),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('campaign', 'assignment_id')
    )
    with op.batch_alter_table('prolific_verdicts', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_prolific_verdicts_campaign'), ['campaign'], unique=False)

    state_dir = context.config.attributes.get("state_dir")
    if state_dir is not None:
        import_files(op.get_bind(), Path(state_dir))


def downgrade() -> None:
    # The releases before read the journal from files this revision no longer writes: dropping rows of a
    # live campaign would lose what was paid. Only a store without Prolific rows goes back.
    bind = op.get_bind()
    for table in ('prolific_studies', 'prolific_decisions', 'prolific_bonuses', 'prolific_posted', 'prolific_hit_types',
                  'prolific_verdicts'):
        if bind.execute(sa.text(f'SELECT COUNT(*) FROM {table}')).scalar():
            raise RuntimeError(f'{table} holds a Prolific journal: a store with Prolific campaigns is not downgraded below 0004')
    with op.batch_alter_table('prolific_verdicts', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_prolific_verdicts_campaign'))

    op.drop_table('prolific_verdicts')
    with op.batch_alter_table('prolific_studies', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_prolific_studies_campaign'))

    op.drop_table('prolific_studies')
    with op.batch_alter_table('prolific_posted', schema=None) as batch_op:
        batch_op.drop_index('ix_prolific_posted_campaign_type')
        batch_op.drop_index(batch_op.f('ix_prolific_posted_campaign'))

    op.drop_table('prolific_posted')
    with op.batch_alter_table('prolific_hit_types', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_prolific_hit_types_campaign'))

    op.drop_table('prolific_hit_types')
    with op.batch_alter_table('prolific_decisions', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_prolific_decisions_campaign'))

    op.drop_table('prolific_decisions')
    with op.batch_alter_table('prolific_bonuses', schema=None) as batch_op:
        batch_op.drop_index('ix_prolific_bonuses_campaign_submission')
        batch_op.drop_index(batch_op.f('ix_prolific_bonuses_campaign'))

    op.drop_table('prolific_bonuses')
