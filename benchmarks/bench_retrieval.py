"""Index build time and query latency of local retrieval, exact (flat) vs approximate (HNSW), same run.

    python benchmarks/bench_retrieval.py [--synthetic 100000] [--queries 100]

Two corpora:
- hotpot-1k: the 991 HotpotQA demo passages, embedded with all-MiniLM-L6-v2 (build time includes embedding).
- synthetic-Nk: N vectors made from the real passage embeddings: each is a random real passage vector plus
  Gaussian noise (sigma 0.5 per unit vector), renormalised, so the data keeps the clustered shape of real
  embeddings (uniform random vectors would be an unrealistically hard case for HNSW). Chunk texts are
  placeholders. Build time is FAISS only: embedding 100k texts would take most of an hour on 2 cores.

Queries are the HotpotQA questions. "search" is PassageIndex.search_vector for one embedded query and k=5
(the FAISS search of 20 candidates plus merging chunks into passages); "end-to-end" is PassageIndex.search
(embed the query too) with the query cache off. recall@10 is the overlap of the top-10 passages with the exact
index's. Target (issue 5): p50 of the approximate search under 5 ms at 100k.
"""

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np

from podium.retrieval.corpus import Chunk, chunk_corpus
from podium.retrieval.embedding import Embedder
from podium.retrieval.hotpot import hotpot_passages, hotpot_questions
from podium.retrieval.index import IndexConfig, PassageIndex, new_faiss_index

NOISE = 0.5
HEADER = (
    "corpus",
    "index",
    "chunks",
    "build_s",
    "search_p50",
    "search_p95",
    "e2e_p50",
    "e2e_p95",
    "recall@10",
    "p50/exact",
)
WIDTHS = (14, 5, 8, 9, 10, 10, 8, 8, 10, 9)


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def timed(function: Callable[..., object], *arguments: object) -> float:
    started = time.perf_counter()
    function(*arguments)
    return time.perf_counter() - started


def synthetic_vectors(base: np.ndarray, count: int, seed: int = 0) -> np.ndarray:
    generator = np.random.default_rng(seed)
    noise = generator.normal(0, NOISE / np.sqrt(base.shape[1]), (count, base.shape[1]))
    vectors = base[generator.integers(0, len(base), count)] + noise
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors.astype(np.float32)


def print_row(cells: tuple[object, ...]) -> None:
    print(
        " ".join(
            f"{cell:<{width}}" if n < 2 else f"{cell:>{width}}"
            for n, (cell, width) in enumerate(zip(cells, WIDTHS, strict=True))
        )
    )


def bench_corpus(
    name: str,
    vectors: np.ndarray,
    chunks: list[Chunk],
    embed_s: float,
    embedder: Embedder,
    queries: list[str],
    query_vectors: np.ndarray,
) -> None:
    exact_top: list[set[str]] = []
    baseline_p50 = 0.0
    for kind in ("flat", "hnsw"):
        config = IndexConfig(index_type=kind)
        index = new_faiss_index(vectors.shape[1], kind, config)
        build_s = embed_s + timed(index.add, vectors)
        passages = PassageIndex(index, chunks, config, embedder, query_cache_size=0)
        passages.search(queries[:3], k=5)  # warm up
        search_ms, tops = [], []
        for vector in query_vectors:
            row = vector[None, :]
            search_ms.append(1000 * timed(passages.search_vector, row, 5))
            tops.append({hit.id for hit in passages.search_vector(row, 10)})
        e2e_ms = [1000 * timed(passages.search, [query], 5) for query in queries]
        search_p50 = statistics.median(search_ms)
        if kind == "flat":
            exact_top, baseline_p50 = tops, search_p50
        recall = float(np.mean([len(top & exact) / 10 for top, exact in zip(tops, exact_top, strict=True)]))
        print_row(
            (
                name,
                kind,
                len(chunks),
                f"{build_s:.2f}",
                f"{search_p50:.3f}",
                f"{percentile(search_ms, 0.95):.3f}",
                f"{statistics.median(e2e_ms):.2f}",
                f"{percentile(e2e_ms, 0.95):.2f}",
                f"{recall:.3f}",
                f"{search_p50 / baseline_p50:.3f}",
            )
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--synthetic", type=int, default=100_000, help="vectors in the synthetic corpus")
    parser.add_argument("--queries", type=int, default=100, help="HotpotQA questions used as queries (max 100)")
    arguments = parser.parse_args()
    embedder = Embedder()
    config = IndexConfig()
    chunks = list(chunk_corpus(hotpot_passages(), config.chunk_words, config.overlap_words))
    queries = [question.question for question in hotpot_questions()[: arguments.queries]]
    started = time.perf_counter()
    vectors = embedder.encode([config.passage_text(chunk) for chunk in chunks])
    embed_s = time.perf_counter() - started
    query_vectors = np.concatenate([embedder.encode_one(query) for query in queries])

    print_row(HEADER)
    bench_corpus("hotpot-1k", vectors, chunks, embed_s, embedder, queries, query_vectors)
    synthetic = synthetic_vectors(vectors, arguments.synthetic)
    synthetic_chunks = [Chunk(f"synthetic-{n}", f"Synthetic {n}", 0, "placeholder") for n in range(len(synthetic))]
    label = f"synthetic-{arguments.synthetic // 1000}k"
    bench_corpus(label, synthetic, synthetic_chunks, 0.0, embedder, queries, query_vectors)


if __name__ == "__main__":
    main()
