"""Shared fixtures; optional engines are skipped with importorskip where they are used."""

import random

import pytest


@pytest.fixture
def rng():
    return random.Random(12345)
