"""``squall secrets ...``: the cluster keyring, and ``squall ui``: the web UI, signed in.

    squall secrets init [--host nimbus.example.com]   # the keyring: admin token, ZooKeeper
                                                      # password, a CA and nimbus's certificate
    squall secrets user add alice --out alice.json    # alice's keyring: her token and the CA
    squall secrets user rotate alice --out alice.json # a new token; the old still works...
    squall secrets user retire alice                  # ...until retired
    squall secrets user remove alice | user list
    squall secrets rotate-zookeeper                   # a new ZooKeeper password (restart daemons)
    squall secrets supervisor --out node.json         # a supervisor's keyring: no user's token
    squall secrets drpc --out drpc.json               # a DRPC server's keyring: the same
    squall ui [--open]                                # the UI's address, signed in with your token

The keyring is ``squall.keyring.path`` (``--config``), else ``$SQUALL_KEYRING``,
else ``~/.squall/keyring.json``; ``--keyring`` overrides all three.
"""

from __future__ import annotations

import argparse
import sys
import webbrowser
from pathlib import Path
from typing import Any
from urllib.parse import quote

from squall.errors import ConfigError
from squall.runtime.settings import load_conf
from squall.security.keyring import Keyring, keyring_path


def _path(args: argparse.Namespace) -> Path:
    if args.keyring:
        return Path(args.keyring).expanduser()
    return keyring_path(load_conf(getattr(args, "config", None), client=True))


def cmd_init(args: argparse.Namespace) -> int:
    path = _path(args)
    if path.exists() and not args.force:
        msg = f"a keyring exists at {path}; --force replaces it (every token and the CA change)"
        raise ConfigError(msg)
    keyring, _token = Keyring.create(hosts=args.host, cluster=args.cluster)
    path = keyring.save(path).resolve()
    print(f"keyring written to {path} (mode 0600)\n"
          f"  API user 'admin' (in nimbus.admins by default); its token is in the keyring\n"
          f"  nimbus certificate for: {', '.join(keyring.data['tls']['hosts'])}\n"
          f"give daemons and clients squall.keyring.path: {path}")
    return 0


def _load(args: argparse.Namespace) -> Keyring:
    return Keyring.load(_path(args))


def _write_client(keyring: Keyring, user: str, token: str, out: str | None) -> None:
    if out:
        target = keyring.client_keyring(user, token).save(out)
        print(f"{user}'s keyring written to {target} (mode 0600): hand it over privately")
    else:
        print(f"{user}'s new token (shown once): {token}")


def cmd_user(args: argparse.Namespace) -> int:
    keyring = _load(args)
    if args.action == "list":
        for name, entry in sorted(keyring.users.items()):
            print(f"{name}\t{len(entry.get('tokens', ()))} token(s)")
        return 0
    if not args.name:
        msg = f"`squall secrets user {args.action}` needs a user name"
        raise ConfigError(msg)
    if args.action == "add":
        _write_client(keyring, args.name, keyring.add_user(args.name), args.out)
    elif args.action == "rotate":
        token = keyring.rotate_user(args.name)
        if keyring.client_user == args.name and not args.out:
            print(f"{args.name}'s new token is in {keyring.path}; the old one works until "
                  f"`squall secrets user retire {args.name}`")
        else:
            _write_client(keyring, args.name, token, args.out)
    elif args.action == "retire":
        print(f"{args.name}: {keyring.retire_user(args.name)} older token(s) no longer accepted")
    elif args.action == "remove":
        keyring.remove_user(args.name)
        print(f"{args.name} removed: its tokens are no longer accepted")
    keyring.save()
    return 0


def cmd_rotate_zookeeper(args: argparse.Namespace) -> int:
    keyring = _load(args)
    keyring.rotate_zookeeper()
    keyring.save()
    print("new ZooKeeper password made; the previous one stays valid.  Copy the keyring to every\n"
          "node and restart the daemons one at a time: the leading nimbus re-ACLs the tree at start.")
    return 0


def cmd_ui(args: argparse.Namespace) -> int:
    """The UI's address with the token in the fragment: a browser never sends a
    fragment to a server, so it stays out of every access log."""
    conf = load_conf(getattr(args, "config", None), client=True)
    seed = conf["nimbus.seeds"][0]
    if not conf["squall.secure"]:
        url = f"http://{seed}/"
    else:
        keyring = Keyring.load(Path(args.keyring).expanduser()) if args.keyring else Keyring.for_conf(conf)
        url = f"https://{seed}/#token={quote(keyring.client_token or '')}"
        if keyring.ca_pem and not conf.get("nimbus.tls.cert.path") and keyring.path is not None:
            # The keyring's own CA signed nimbus's certificate: no browser knows it.
            ca = keyring.path.with_name("ca.pem")
            if not ca.exists():
                ca.write_text(keyring.ca_pem)  # a public certificate: no secret in it
            print(f"(the browser will warn that the certificate is not trusted: nimbus's is signed by "
                  f"this cluster's own CA. Import {ca} into the browser's authorities to trust it, or "
                  f"accept the warning for {seed.split(':')[0]}.)", file=sys.stderr)
    print(url)
    if args.open:
        webbrowser.open(url)
    return 0


def cmd_supervisor(args: argparse.Namespace) -> int:
    target = _load(args).supervisor_keyring(args.host).save(args.out)
    print(f"supervisor keyring written to {target} (mode 0600): ZooKeeper's credentials, the CA and a "
          "certificate for its logviewer, no token itself and no user's (its logviewer takes only the "
          "short-lived tokens nimbus mints, so a user added later needs no new copy); copy it to each "
          "supervisor node as its squall.keyring.path")
    return 0


def cmd_drpc(args: argparse.Namespace) -> int:
    target = _load(args).drpc_keyring(args.host).save(args.out)
    print(f"DRPC server keyring written to {target} (mode 0600): ZooKeeper's credentials, the CA, a "
          "certificate for the server and the users' token hashes as of now (no token itself; users added "
          "later are known from what the leading nimbus publishes); give it to the DRPC server as its "
          "squall.keyring.path")
    return 0


def add_commands(sub: Any) -> None:
    def command(parent: Any, name: str, func: Any, help_text: str) -> argparse.ArgumentParser:
        p = parent.add_parser(name, help=help_text)
        p.add_argument("--config", default=argparse.SUPPRESS,
                       help="squall.yaml to read (default: $SQUALL_CONF or ./squall.yaml)")
        p.add_argument("--keyring", default=None, help="the keyring file (default: squall.keyring.path)")
        p.set_defaults(func=func)
        return p

    secrets = sub.add_parser("secrets", help="the cluster keyring: tokens, ZooKeeper password, CA")
    inner = secrets.add_subparsers(dest="secrets_command", required=True)
    p = command(inner, "init", cmd_init, "write a new cluster keyring (0600)")
    p.add_argument("--host", action="append", default=[], help="another name or address of nimbus")
    p.add_argument("--cluster", default=None, help="the cluster's name (default: random)")
    p.add_argument("--force", action="store_true", help="replace an existing keyring")
    p = command(inner, "user", cmd_user, "API users: add, rotate, retire, remove, list")
    p.add_argument("action", choices=["add", "rotate", "retire", "remove", "list"])
    p.add_argument("name", nargs="?")
    p.add_argument("--out", default=None, help="write the user's own keyring (token and CA) here")
    command(inner, "rotate-zookeeper", cmd_rotate_zookeeper, "a new ZooKeeper digest password")
    p = command(inner, "supervisor", cmd_supervisor, "write a supervisor's keyring: no user's token")
    p.add_argument("--out", required=True, help="where to write it (0600)")
    p.add_argument("--host", action="append", default=[],
                   help="a name or address of the supervisor's node: its logviewer's certificate names "
                        "these only, never nimbus's (none: loopback only)")
    p = command(inner, "drpc", cmd_drpc, "write a DRPC server's keyring: no user's token")
    p.add_argument("--out", required=True, help="where to write it (0600)")
    p.add_argument("--host", action="append", default=[],
                   help="a name or address of the DRPC server's node: its certificate names these only "
                        "(none: loopback only)")
    p = command(sub, "ui", cmd_ui, "print (or --open) the web UI's address, signed in from the keyring")
    p.add_argument("--open", action="store_true", help="open it in a browser")
