#!/usr/bin/env python3
"""Old binary against new, taking turns on the same machine: `kura bench` of a few engines
and key orders, best run per phase of each side. Usage: OLD_KURA=... NEW_KURA=... python3
tools/ab_binaries.py (docs/bench.md, the registry refactor section). AB_CONFS picks the
runs, e.g. `hash:sequential,hash:random,tree:random` (default: tree both orders, baby, hash,
tiny random)."""
import collections
import json
import os
import subprocess
bins={"old": os.environ["OLD_KURA"], "new": os.environ["NEW_KURA"]}
confs=[("tree",False),("tree",True),("baby",False),("hash",False),("tiny",True)]
if os.environ.get("AB_CONFS"):
    confs=[(c.split(":")[0], c.split(":")[1]=="random") for c in os.environ["AB_CONFS"].split(",")]
best=collections.defaultdict(dict)
for rnd in range(3):
    for eng,rk in confs:
        order=["old","new"] if rnd%2==0 else ["new","old"]
        for side in order:
            cmd=[bins[side],"bench","--engine",eng,"--iter","1000000","--size","8","--json"]
            if eng in("tree","hash"):
                # kura bench refuses a database left by the previous run (without --force,
                # which older binaries lack): remove it first.
                db=f"/tmp/ab.{ 'kut' if eng=='tree' else 'kuh'}"
                for leftover in (db, db+".journal"):
                    if os.path.exists(leftover): os.remove(leftover)
                cmd+=["--path",db]
            if rk: cmd.append("--random-key")
            out=subprocess.run(cmd,capture_output=True,text=True).stdout
            for line in out.splitlines():
                if not line.startswith("{"): continue
                r=json.loads(line); ph=r["phase"]
                if ph not in("set","get","iterate","remove"): continue
                k=(eng,"random" if rk else "sequential",ph)
                best[k][side]=max(best[k].get(side,0),r["qps"])
print(f"| engine | keys | phase | old ({bins['old']}) | new ({bins['new']}) | new/old |")
print("|---|---|---|---:|---:|---:|")
for k,v in best.items():
    print(f"| {k[0]} | {k[1]} | {k[2]} | {v['old']/1e6:.2f}M | {v['new']/1e6:.2f}M | {v['new']/v['old']:.2f} |")
