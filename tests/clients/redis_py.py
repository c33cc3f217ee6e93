"""redis-py (RESP3 via HELLO 3, as redis-py 8 does by default) against strata serve."""
import os

import redis

port = int(os.environ["STRATA_RESP_PORT"])
for protocol in (2, 3):
    r = redis.Redis(port=port, protocol=protocol, decode_responses=True)
    prefix = f"py{protocol}:"
    assert r.ping()
    assert r.set(prefix + "a", "1")
    assert r.incr(prefix + "a") == 2
    assert r.incrby(prefix + "a", 5) == 7
    assert r.get(prefix + "missing") is None
    assert r.set(prefix + "a", "x", nx=True) is None
    assert r.set(prefix + "a", "8", xx=True, get=True) == "7"
    with r.pipeline(transaction=False) as p:
        for i in range(500):
            p.set(f"{prefix}k{i:03d}", i)
        p.mget([f"{prefix}k000", f"{prefix}k499", f"{prefix}nope"])
        results = p.execute()
    assert results[-1] == ["0", "499", None], results[-1]
    keys = sorted(r.scan_iter(match=prefix + "k*", count=100))
    assert keys == [f"{prefix}k{i:03d}" for i in range(500)]
    assert r.delete(prefix + "k000", prefix + "k001", prefix + "nope") == 2
    assert r.exists(prefix + "k002", prefix + "k000") == 1
    assert r.getdel(prefix + "k002") == "2"
    assert r.append(prefix + "s", "ab") == 2 and r.strlen(prefix + "s") == 2
    info = r.info()
    assert "redis_version" in info and "wal_bytes" in r.info("engine")
    assert r.client_setname("loader") and r.client_getname() == "loader"
    try:
        r.incr(prefix + "s")
        raise AssertionError("INCR on text succeeded")
    except redis.ResponseError as e:
        assert "not an integer" in str(e)
print("redis-py ok")
