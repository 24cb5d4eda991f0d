"""Alembic environment for the history database; kernelbot.history runs it programmatically."""

# NOTE: kernelbot.history passes an open connection inside its own transaction (config.attributes
# ["connection"]), so a whole upgrade is one transaction and concurrent upgraders wait for each other.
# Run by hand: `alembic -c storage/alembic.ini -x db=URL upgrade head`.

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine

from kernelbot.history.models import Base

config = context.config
target_metadata = Base.metadata


def _configure(connection: object) -> None:
    context.configure(
        connection=connection,  # type: ignore[arg-type]
        target_metadata=target_metadata,
        transactional_ddl=True,  # SQLite too: its DDL is transactional, Alembic just defaults it off
        compare_type=True,
    )


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure(connection)
        with context.begin_transaction():
            context.run_migrations()
        return
    url = context.get_x_argument(as_dictionary=True).get("db") or config.get_main_option("sqlalchemy.url")
    if not url:
        raise SystemExit("pass the database: alembic -c storage/alembic.ini -x db=URL upgrade head")
    engine = create_engine(url)
    with engine.begin() as connection:
        _configure(connection)
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


if context.is_offline_mode():
    raise SystemExit("offline (--sql) mode is not supported; run against a database")
run_migrations_online()
