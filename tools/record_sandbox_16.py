"""Record lesson 16's hostile programs under bubblewrap into data/sandbox_outcomes_16.json, for
where the lesson cannot run them (isolation "none": macOS, a container without user namespaces).

    python tools/record_sandbox_16.py

Fails (and writes nothing) unless bubblewrap works here and every program ends as expected.
"""

import evalcore as ec

if __name__ == "__main__":
    record = ec.record_hostile_outcomes()
    print(f"{len(record['programs'])} programs under {record['isolation']}:")
    for name, outcome in record["programs"].items():
        print(f"  {name:30} {outcome['outcome']:8} {outcome['detail']}")
    print(f"written to {ec.SANDBOX_OUTCOMES_PATH.relative_to(ec.ROOT)}")
