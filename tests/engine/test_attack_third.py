"""Issue 61 (a third attack run): what a local Ray census cleans up is Ray's own processes of its run, never
a process the person (or another model) started meanwhile."""

import os
import subprocess

import pytest

from attn_gui.engine.analysis.corpus.census import census
from attn_gui.engine.analysis.corpus.read import read_corpus
from attn_gui.engine.analysis.corpus.shards import Settings
from corpus_data import llama_folder, sentences  # tests/

RAY_ENV = {"RAY_AUTH_MODE": "disabled"}  # Ray listens on this machine only


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="the reaper reads Linux's /proc")
def test_a_process_started_during_a_local_census_survives_its_cleanup(tmp_path, monkeypatch):
    pytest.importorskip("ray")
    from attn_gui.engine.analysis.corpus import ray as corpus_ray

    for name, value in RAY_ENV.items():
        monkeypatch.setenv(name, value)
    llama_folder(tmp_path / "model")
    (tmp_path / "corpus.txt").write_text("\n".join(sentences(40)))
    mine: list[subprocess.Popen] = []

    def start_mine(progress) -> None:  # the person's own process, started while Ray runs
        if not mine:
            mine.append(subprocess.Popen(["sleep", "600"]))

    try:
        census(read_corpus(tmp_path / "corpus.txt"), tmp_path / "out",
               Settings(model=str(tmp_path / "model"), shard_size=16), runner=corpus_ray.runner("local", 2),
               progress=start_mine)
        assert mine
        assert mine[0].poll() is None  # before: -9, the reaper SIGKILLed every descendant started after it
    finally:
        for proc in mine:
            proc.kill()
            proc.wait()
