"""Version 2 of tests/apps/upgrade_v1.py: ``order`` checks stock before it waits."""

from __future__ import annotations

import os

from pydantic import BaseModel

from raftflow import Engine

engine = Engine()


class Order(BaseModel):
    n: int
    sleep: float = 0.0


@engine.step
def prepare(n: int) -> str:
    return f"prepared {n} in {os.getpid()}"


@engine.step
def check_stock(n: int) -> str:
    return f"in stock {n}"


@engine.step
def ship(n: int) -> str:
    return f"shipped {n} in {os.getpid()}"


@engine.workflow
def order(spec: Order) -> list[str]:
    done = [prepare(spec.n), check_stock(spec.n)]
    if spec.sleep:
        engine.sleep(spec.sleep)
    else:
        engine.recv(topic="go", timeout=300)
    done.append(ship(spec.n))
    return done
