"""Point-in-region throughput of the eligibility regions.

Tests 1M random points north of 40°N against every marine region with shapely's vectorised
``intersects_xy`` on prepared geometries, and with one STRtree query; then a per-point Python
loop (``geometry.intersects(Point)`` for every region) on a subsample. Prints both rates and
the ratio. Run: ``.venv/bin/python bench/bench_eligibility.py [n_points] [loop_points]``.
"""

from __future__ import annotations

import sys
import time

import numpy as np
from shapely.geometry import Point

from arcticqa.geo.regions import load_regions, normalize_lon


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    n_loop = int(sys.argv[2]) if len(sys.argv) > 2 else 20_000
    regions = load_regions()
    rng = np.random.default_rng(42)
    lats = rng.uniform(40.0, 90.0, n)
    lons = rng.uniform(-180.0, 180.0, n)
    print(f"regions: {len(regions)} polygons from {regions.path.name} (sha256 {regions.sha256[:12]})")

    regions.membership(lats[:1000], lons[:1000])  # warm-up
    t0 = time.perf_counter()
    member = regions.membership(lats, lons)
    t_vec = time.perf_counter() - t0

    t0 = time.perf_counter()
    pairs = regions.query(lats, lons)
    t_tree = time.perf_counter() - t0

    sub_lat, sub_lon = lats[:n_loop], normalize_lon(lons[:n_loop])
    t0 = time.perf_counter()
    loop = np.zeros((n_loop, len(regions)), dtype=bool)
    for i in range(n_loop):
        p = Point(float(sub_lon[i]), float(sub_lat[i]))
        for j, geom in enumerate(regions.geometries):
            loop[i, j] = geom.intersects(p)
    t_loop = time.perf_counter() - t0

    assert (loop == member[:n_loop]).all(), "loop and vectorised results differ"
    tree_hits = np.zeros(n, dtype=bool)
    tree_hits[pairs[0]] = True
    assert (tree_hits == member.any(axis=1)).all(), "STRtree and vectorised results differ"

    rate_vec, rate_tree, rate_loop = n / t_vec, n / t_tree, n_loop / t_loop
    print(f"points in some region: {member.any(axis=1).mean():.1%}")
    print(f"{'method':<50}{'points':>10}{'seconds':>10}{'points/s':>14}{'vs loop':>10}")
    print(f"{'vectorised intersects_xy (prepared), all regions':<50}{n:>10}{t_vec:>10.3f}{rate_vec:>14,.0f}"
          f"{rate_vec / rate_loop:>9.1f}x")
    print(f"{'STRtree.query(points, intersects)':<50}{n:>10}{t_tree:>10.3f}{rate_tree:>14,.0f}"
          f"{rate_tree / rate_loop:>9.1f}x")
    print(f"{'per-point Python loop, all regions':<50}{n_loop:>10}{t_loop:>10.3f}{rate_loop:>14,.0f}{1.0:>9.1f}x")


if __name__ == "__main__":
    main()
