"""llm_sent: requests written before they are sent (a model config's recover_in_flight)

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-08 00:05:00.000000
"""
from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('llm_sent',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('request_hash', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('send_id', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('worker', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('run_id', sqlmodel.sql.sqltypes.AutoString(), nullable=True),
    sa.Column('sent_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('llm_sent', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_llm_sent_request_hash'), ['request_hash'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('llm_sent', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_llm_sent_request_hash'))

    op.drop_table('llm_sent')
