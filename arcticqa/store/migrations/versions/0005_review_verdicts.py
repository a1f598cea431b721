"""review plans, assignments and verdicts (the expert review workbench)

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-03 09:20:00.000000
"""
from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('review_plan',
    sa.Column('id', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('seed', sa.Integer(), nullable=False),
    sa.Column('double_share', sa.Float(), nullable=False),
    sa.Column('reviewers', sa.JSON(), nullable=True),
    sa.Column('strata', sa.JSON(), nullable=True),
    sa.Column('params', sa.JSON(), nullable=True),
    sa.Column('created_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.Column('updated_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_table('review_assignment',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('plan_id', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('item_key', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('population', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('stratum', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('reviewer', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('slot', sa.Integer(), nullable=False),
    sa.Column('position', sa.Integer(), nullable=False),
    sa.Column('content_hash', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('created_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.ForeignKeyConstraint(['plan_id'], ['review_plan.id'], ),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('plan_id', 'item_key', 'slot')
    )
    with op.batch_alter_table('review_assignment', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_review_assignment_plan_id'), ['plan_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_review_assignment_item_key'), ['item_key'], unique=False)
        batch_op.create_index(batch_op.f('ix_review_assignment_reviewer'), ['reviewer'], unique=False)

    op.create_table('review_verdict',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('plan_id', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('item_key', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('reviewer', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('verdict', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('failure_types', sa.JSON(), nullable=True),
    sa.Column('note', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('content_hash', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('created_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.ForeignKeyConstraint(['plan_id'], ['review_plan.id'], ),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('review_verdict', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_review_verdict_plan_id'), ['plan_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_review_verdict_item_key'), ['item_key'], unique=False)
        batch_op.create_index(batch_op.f('ix_review_verdict_reviewer'), ['reviewer'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('review_verdict', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_review_verdict_reviewer'))
        batch_op.drop_index(batch_op.f('ix_review_verdict_item_key'))
        batch_op.drop_index(batch_op.f('ix_review_verdict_plan_id'))
    op.drop_table('review_verdict')
    with op.batch_alter_table('review_assignment', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_review_assignment_reviewer'))
        batch_op.drop_index(batch_op.f('ix_review_assignment_item_key'))
        batch_op.drop_index(batch_op.f('ix_review_assignment_plan_id'))
    op.drop_table('review_assignment')
    op.drop_table('review_plan')
