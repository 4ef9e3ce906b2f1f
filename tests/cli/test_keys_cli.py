"""``kb-ray keys create|list|revoke`` (kb_ray/cli/keys_command.py) on a real catalog in tmp_path:
the key is printed once and only its hash is stored; list shows no secret; revoke stops it."""

from __future__ import annotations

import json

from kb_ray.auth.keys import ApiKeyStore
from kb_ray.catalog.delta import DeltaCatalog
from kb_ray.cli import main
from tests.conftest import REPO_ROOT


def _keys(capsys, root, *argv: str) -> tuple[int, str, str]:
    code = main(["keys", *argv, "--config", str(REPO_ROOT / "conf" / "local.yaml"), "--set", f"kb_root={root}"])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_create_prints_the_key_once_list_hides_it_and_revoke_stops_it(tmp_path, capsys):
    root = tmp_path / "kb"
    code, out, _ = _keys(capsys, root, "create", "--tenant", "acme", "--role", "writer",
                         "--principal", "team-a", "--principal", "team-b")
    key, note = out.strip().splitlines()
    assert code == 0 and key.startswith("kbr_") and "will not be shown again" in note
    store = ApiKeyStore(DeltaCatalog.open(str(root), create=False), cache_ttl_s=0)
    caller = store.resolve(key)
    assert (caller.tenant, caller.role, caller.principals) == ("acme", "writer", ("team-a", "team-b"))
    secret = key.split("_", 2)[2]
    stored = DeltaCatalog.open(str(root), create=False).read("api_keys").to_pylist()
    assert len(stored) == 1 and secret not in json.dumps(stored, default=str)  # the hash only

    code, listed, _ = _keys(capsys, root, "list", "--json")
    rows = json.loads(listed)
    assert code == 0 and [(r["key_id"], r["tenant"], r["role"], r["revoked_at"]) for r in rows] == [
        (caller.key_id, "acme", "writer", None)]
    assert secret not in listed and "secret_sha256" not in listed
    code, table, _ = _keys(capsys, root, "list")
    assert code == 0 and caller.key_id in table and "active" in table and secret not in table

    code, out, _ = _keys(capsys, root, "revoke", caller.key_id)
    assert code == 0 and f"key {caller.key_id} revoked" in out
    assert store.resolve(key) is None
    code, table, _ = _keys(capsys, root, "list")
    assert "revoked" in table and "active" not in table


def test_unknown_key_id_and_role_are_one_line_errors(tmp_path, capsys):
    root = tmp_path / "kb"
    code, _, err = _keys(capsys, root, "revoke", "nope")
    assert code == 2 and err.strip().splitlines() == [
        "kb-ray: error: no API key 'nope'; `kb-ray keys list` shows the key ids"]
    code, _, err = _keys(capsys, root, "create", "--tenant", " ", "--role", "reader")
    assert code == 2 and "the tenant is empty" in err
