"""The ``sqlalchemy-rqlite`` dialect (2.0, on pyrqlite 2.2.3) against rqlite 8.26.8, as
docs/guides/transactions.md ("Your own SQLAlchemy engine on the cluster") describes it:
plain create, insert, select and update work; transactions do not exist (``rollback()``
undoes nothing); parameters are written into the SQL text by pyrqlite (quoted, not bound);
a read that does not start with SELECT (``WITH ...``) is sent as a write and returns no
rows. raftflow itself does not use it (transaction steps go through the engine)."""

from __future__ import annotations

import pytest
from raftflow.transports.rqlite.local import LocalCluster

sa = pytest.importorskip("sqlalchemy")
pytest.importorskip("sqlalchemy_rqlite")


@pytest.fixture
def engine(rqlite_cluster: LocalCluster) -> sa.Engine:
    host = rqlite_cluster.leader().url.split("://", 1)[1]
    engine = sa.create_engine(f"rqlite+pyrqlite://{host}/")
    with engine.connect() as conn:
        conn.execute(sa.text("DROP TABLE IF EXISTS sarq_things"))
    return engine


def test_the_dialect_on_rqlite_8_26_8(engine: sa.Engine) -> None:
    metadata = sa.MetaData()
    things = sa.Table(
        "sarq_things",
        metadata,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.String),
    )
    metadata.create_all(engine)
    with engine.connect() as conn:
        conn.execute(things.insert().values(id=1, name="a"))
        conn.execute(things.insert().values(id=2, name="it's"))  # quoted into the text
        conn.commit()
        assert conn.execute(sa.select(things).order_by(things.c.id)).all() == [
            (1, "a"),
            (2, "it's"),
        ]
        conn.execute(things.update().where(things.c.id == 1).values(name="b"))
        conn.rollback()  # no transactions: the update stays
        assert conn.execute(sa.select(things.c.name).where(things.c.id == 1)).scalar() == "b"
        with pytest.raises(sa.exc.ResourceClosedError):  # sent to /db/execute: no rows
            conn.execute(sa.text("WITH x AS (SELECT name FROM sarq_things) SELECT * FROM x")).all()
        conn.execute(sa.text("DROP TABLE sarq_things"))
