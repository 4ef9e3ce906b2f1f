"""``kb-ray keys create|list|revoke``: the API keys of the search service (docs/auth.md)."""

from __future__ import annotations

import argparse
import json

from kb_ray.cli.common import config_from_args


def register(commands: argparse._SubParsersAction) -> None:
    from kb_ray.cli import add_config_arguments

    keys = commands.add_parser("keys", help="create, list or revoke API keys of the search service")
    actions = keys.add_subparsers(dest="keys_action", required=True)
    create = actions.add_parser("create", help="make a key (printed once, never shown again)")
    create.add_argument("--tenant", required=True, help="the tenant whose collections the key may see")
    create.add_argument("--role", required=True, choices=["reader", "writer", "admin"])
    create.add_argument("--principal", dest="principals", action="append", default=[], metavar="P",
                        help="a principal of the key, matched against documents' acl (repeatable)")
    listing = actions.add_parser("list", help="every key's id, tenant, role and state (no secrets)")
    listing.add_argument("--json", action="store_true")
    revoke = actions.add_parser("revoke", help="refuse a key from now on (within serve.auth.cache_ttl_s)")
    revoke.add_argument("key_id")
    for parser in (create, listing, revoke):
        add_config_arguments(parser)
        parser.set_defaults(handler=run_keys)


def run_keys(args: argparse.Namespace) -> int:
    from kb_ray.auth.keys import ApiKeyStore
    from kb_ray.catalog.delta import DeltaCatalog

    config = config_from_args(args)
    store = ApiKeyStore(DeltaCatalog.open(config.kb_root, storage_options=config.storage_options, create=True))
    if args.keys_action == "create":
        key, row = store.create(tenant=args.tenant, role=args.role, principals=args.principals)
        print(key)
        print(f"key {row['key_id']} for tenant {row['tenant']} ({row['role']}); "
              "store it now: it will not be shown again")
    elif args.keys_action == "list":
        rows = store.list()
        if args.json:
            print(json.dumps(rows, default=str, indent=2))
        for row in [] if args.json else rows:
            state = f"revoked {row['revoked_at']:%Y-%m-%d %H:%M}" if row["revoked_at"] else "active"
            print(f"{row['key_id']}  {row['tenant']}  {row['role']}  principals={','.join(row['principals'] or [])}"
                  f"  created {row['created_at']:%Y-%m-%d %H:%M}  {state}")
    else:
        store.revoke(args.key_id)
        print(f"key {args.key_id} revoked")
    return 0
