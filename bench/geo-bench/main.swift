// geo-bench: the nearest-courier query on dispatch's in-memory index beside Redis GEOSEARCH and PostGIS KNN.
// The work lives in Bench.swift, off the main actor.
GeoBench.main()
