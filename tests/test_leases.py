"""Leases: one holder at a time, renewal, expiry and takeover, clean release."""

from __future__ import annotations

from pathlib import Path

from sqlmodel import Session, SQLModel, create_engine

from campaign.leases import LeaseRow, holder_of, new_holder, release, try_acquire


def _engine(tmp_path: Path):  # type: ignore[no-untyped-def]
    engine = create_engine(f"sqlite:///{tmp_path / 'l.db'}")
    SQLModel.metadata.create_all(engine, tables=[LeaseRow.__table__])  # type: ignore[attr-defined]
    return engine


def test_one_holder_renewal_expiry_and_release(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    a, b = new_holder(), new_holder()
    assert a != b
    with Session(engine) as s1, Session(engine) as s2:
        assert try_acquire(s1, "c1", a, now=100.0, ttl=10.0)
        assert not try_acquire(s2, "c1", b, now=105.0, ttl=10.0)  # held and not expired
        assert try_acquire(s1, "c1", a, now=108.0, ttl=10.0)  # renewal moves the expiry
        assert not try_acquire(s2, "c1", b, now=115.0, ttl=10.0)
        assert holder_of(s2, "c1", now=115.0) == a
        assert try_acquire(s2, "c1", b, now=118.5, ttl=10.0)  # a stopped renewing: b takes over
        assert not try_acquire(s1, "c1", a, now=119.0, ttl=10.0)  # and a cannot take it back
        release(s2, "c1", b)
        assert holder_of(s1, "c1", now=119.0) is None
        assert try_acquire(s1, "c1", a, now=119.0, ttl=10.0)
        assert try_acquire(s2, "c2", b, now=119.0, ttl=10.0)  # campaigns are independent
