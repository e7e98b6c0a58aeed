"""``audit store info|prune|export|import``: the neighbourhood store (masked-LM answers shared by every run)."""

from __future__ import annotations

import math
from pathlib import Path

import typer

from textaudit.cli.app import AuditCommand, AuditGroup, app
from textaudit.cli.options import JsonOpt, StoreOpt
from textaudit.cli.output import emit_json, notice, print_table
from textaudit.errors import TextAuditError
from textaudit.neighborhoods.store import NeighborhoodStore, current_store, use_store

store_app = typer.Typer(cls=AuditGroup, no_args_is_help=True, help=(
    "The neighbourhood store: masked-LM answers computed once and shared by every run, process and worker."))
app.add_typer(store_app, name="store")


def _store(path: str | None, *, must_exist: bool = True):
    with use_store(path):
        store = current_store()
    if store is None:
        raise TextAuditError("--store off names no store; give the store's file (default $TEXTAUDIT_CACHE/neighborhoods.sqlite)")
    if must_exist and not store.path.is_file():
        raise TextAuditError(f"there is no neighbourhood store at {store.path} yet (an audit that builds neighbourhoods "
                             "creates it); give --store PATH for another one")
    return store


@store_app.command("info", cls=AuditCommand)
def info(store: StoreOpt = None, json_out: JsonOpt = False) -> None:
    """Size, entries, bytes per entry and hit rate of the store, per masked LM and per classifier (scores)."""
    s = _store(store)
    out = s.info()
    if json_out:
        emit_json(out)
        return
    print_table(f"neighbourhood store {out['path']}", ["", "value"],
                [["size (MB)", round(out["bytes"] / 1e6, 2)], ["entries", out["entries"]],
                 ["bytes per entry", out["bytes_per_entry"]], ["hits", out["hits"]], ["misses", out["misses"]],
                 ["hit rate", out["hit_rate"]]])
    if out["mlms"]:
        print_table("masked LMs", ["name", "fingerprint", "entries", "hits", "misses"],
                    [[m["name"], m["fingerprint"][:16], m["entries"], m["hits"], m["misses"]] for m in out["mlms"]])
    if out["scores"]["classifiers"]:
        print_table("classifiers' scores", ["name", "identity", "entries", "hits", "misses"],
                    [[c["name"], c["identity"], c["entries"], c["hits"], c["misses"]] for c in out["scores"]["classifiers"]])


@store_app.command("prune", cls=AuditCommand)
def prune(max_gb: float = typer.Option(..., "--max-gb", help="Keep the store at most this size (GB), dropping the "
                                       "entries used longest ago."),
          store: StoreOpt = None, json_out: JsonOpt = False) -> None:
    """Drop the least recently used entries until the store is at most --max-gb."""
    if not (math.isfinite(max_gb) and 0 <= max_gb <= 1e6):
        raise TextAuditError(f"--max-gb must be a size in GB, from 0 to 1,000,000 (got {max_gb})")
    s = _store(store)
    dropped = s.prune(int(max_gb * 1e9))
    out = {**s.info(), "dropped": dropped}
    if json_out:
        emit_json(out)
        return
    notice(f"dropped {dropped} entries; the store is {out['bytes'] / 1e6:.2f} MB with {out['entries']} entries")


@store_app.command("export", cls=AuditCommand)
def export(out: Path = typer.Argument(..., help="A new file: the exported store (one portable SQLite file)."),
           mlm: str = typer.Option(None, "--mlm", help="Export one masked LM's entries: its name or a fingerprint prefix."),
           store: StoreOpt = None, json_out: JsonOpt = False) -> None:
    """Copy the store's entries (all, or one masked LM's) to one portable file that audit store import reads elsewhere."""
    s = _store(store)
    n = s.export(out, mlm=mlm)
    if json_out:
        emit_json({"exported": n.copied, "out": str(out), "bad": sum(n.bad.values())})
        return
    notice(f"exported {n.copied} entries to {out}" + (f" ({sum(n.bad.values())} bad entries left out)" if n.bad else ""))


@store_app.command("import", cls=AuditCommand)
def import_(source: Path = typer.Argument(..., help="A store file written by audit store export (or any store)."),
            store: StoreOpt = None, json_out: JsonOpt = False) -> None:
    """Merge another store's entries into this one (each checked; an entry never replaces a larger one)."""
    if not source.is_file():
        raise TextAuditError(f"{source} does not exist; give a file written by audit store export")
    src = NeighborhoodStore(source, readonly=True, quiet=True)
    if not src.available:
        raise TextAuditError(f"{source} is not a neighbourhood store (or it is damaged); export it again")
    s = _store(store, must_exist=False)
    n = s.merge_from(src)
    s.close()
    if json_out:
        emit_json({"imported": n.copied, "kept": n.kept, "bad": dict(n.bad), "store": str(s.path)})
        return
    notice(f"{n.describe()}: {s.path}")
