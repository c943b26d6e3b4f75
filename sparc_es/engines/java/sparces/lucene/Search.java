/*
 * sparc-es: top-k search of a Lucene index in one call from Python.
 *
 * Pyserini's searchers break score ties with a Sort on the external id (a doc-values lookup for
 * every competitive hit) and load every hit's stored document, then pyjnius turns each hit into a
 * Python proxy: at k = 1000 that is most of a query's time. Here the query is built, run with
 * Lucene's own top-score collector (ties go to the lower docid, which is input order), and the hits
 * come back as three arrays.
 *
 * Every method is static, so that Python calls no instance method of a shared Java object while it
 * searches or reads what the index holds: pyjnius binds an instance method to its object on the
 * method's shared descriptor, so two Python threads calling one (even on two objects of one class)
 * can run it on the wrong object, and the JVM crashed.
 */
package sparces.lucene;

import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

import org.apache.lucene.index.BinaryDocValues;
import org.apache.lucene.index.IndexReader;
import org.apache.lucene.index.LeafReaderContext;
import org.apache.lucene.index.PostingsEnum;
import org.apache.lucene.index.ReaderUtil;
import org.apache.lucene.index.Term;
import org.apache.lucene.search.BooleanClause;
import org.apache.lucene.search.BooleanQuery;
import org.apache.lucene.search.BoostQuery;
import org.apache.lucene.search.Collector;
import org.apache.lucene.search.CollectorManager;
import org.apache.lucene.search.FilterCollector;
import org.apache.lucene.search.FilterLeafCollector;
import org.apache.lucene.search.FilterScorable;
import org.apache.lucene.search.IndexSearcher;
import org.apache.lucene.search.DocIdSetIterator;
import org.apache.lucene.search.LeafCollector;
import org.apache.lucene.search.Query;
import org.apache.lucene.search.Scorable;
import org.apache.lucene.search.ScoreDoc;
import org.apache.lucene.search.ScoreMode;
import org.apache.lucene.search.Scorer;
import org.apache.lucene.search.TermQuery;
import org.apache.lucene.search.TopDocs;
import org.apache.lucene.search.TopScoreDocCollector;
import org.apache.lucene.search.Weight;

public final class Search {
  private Search() {}

  /** One query's hits, best first: Lucene docids, scores and the "id" of each. */
  public static final class Hits {
    public final int[] docs;
    public final float[] scores;
    public final String[] ids;

    Hits(int[] docs, float[] scores, String[] ids) {
      this.docs = docs;
      this.scores = scores;
      this.ids = ids;
    }
  }

  /** A bag of weighted terms: one SHOULD clause per term, its weight as the boost. */
  public static Query weighted(String field, String[] terms, float[] weights, int from, int to) {
    BooleanQuery.Builder builder = new BooleanQuery.Builder();
    for (int i = from; i < to; i++) {
      Query term = new TermQuery(new Term(field, terms[i]));
      builder.add(weights[i] == 1f ? term : new BoostQuery(term, weights[i]), BooleanClause.Occur.SHOULD);
    }
    return builder.build();
  }

  /** The top k hits of a query. Hit counting stops at k, so Lucene can skip blocks that cannot compete. */
  public static Hits top(IndexSearcher searcher, Query query, int k, String idField) throws IOException {
    TopDocs top = searcher.search(query, TopScoreDocCollector.createSharedManager(k, null, k));
    return hits(searcher, top, idField);
  }

  private static Hits hits(IndexSearcher searcher, TopDocs top, String idField) throws IOException {
    ScoreDoc[] found = top.scoreDocs;
    int[] docs = new int[found.length];
    float[] scores = new float[found.length];
    for (int i = 0; i < found.length; i++) {
      docs[i] = found[i].doc;
      scores[i] = found[i].score;
    }
    return new Hits(docs, scores, ids(searcher, docs, idField));
  }

  /**
   * {@link #top} with the threshold over-estimated (Broder et al., CIKM 2003; the lever
   * scripts/studies/threshold_factor.py measures, not the default): the scorer is told that a hit
   * must beat {@code factor} times the k-th best score so far, so block-max pruning skips more. A
   * hit between the k-th best and that bound is kept when the scorer reaches it and lost when it
   * skips it; {@code factor} 1 is {@link #top}.
   */
  public static Hits overestimated(IndexSearcher searcher, Query query, int k, float factor, String idField)
      throws IOException {
    CollectorManager<TopScoreDocCollector, TopDocs> inner = TopScoreDocCollector.createSharedManager(k, null, k);
    List<TopScoreDocCollector> made = new ArrayList<>();
    TopDocs top = searcher.search(query, new CollectorManager<Collector, TopDocs>() {
      @Override
      public Collector newCollector() throws IOException {
        TopScoreDocCollector collector = inner.newCollector();
        synchronized (made) {
          made.add(collector);
        }
        return new FilterCollector(collector) {
          @Override
          public LeafCollector getLeafCollector(LeafReaderContext context) throws IOException {
            return new FilterLeafCollector(super.getLeafCollector(context)) {
              @Override
              public void setScorer(Scorable scorer) throws IOException {
                super.setScorer(new FilterScorable(scorer) {
                  @Override
                  public void setMinCompetitiveScore(float minScore) throws IOException {
                    in.setMinCompetitiveScore(minScore * factor);
                  }
                });
              }
            };
          }
        };
      }

      @Override
      public TopDocs reduce(Collection<Collector> collectors) throws IOException {
        return inner.reduce(made);
      }
    });
    return hits(searcher, top, idField);
  }

  /** {@link #overestimated} for one bag of weighted terms of {@code field}. */
  public static Hits overestimatedBag(IndexSearcher searcher, String field, String[] terms, float[] weights, int k,
                                      float factor, String idField) throws IOException {
    return overestimated(searcher, weighted(field, terms, weights, 0, terms.length), k, factor, idField);
  }

  /**
   * {@link #rescored} for one bag of weighted terms (scripts/studies/two_step.py, the two-step lever
   * measured in docs/benchmarks.md): the same terms and weights asked of
   * {@code firstField} on {@code first} (which holds each document's largest weights) and of
   * {@code fullField} on {@code full}.
   */
  public static Hits twoStep(IndexSearcher first, String firstField, IndexSearcher full, String fullField,
                             String[] terms, float[] weights, int window, int k, String idField) throws IOException {
    return rescored(first, weighted(firstField, terms, weights, 0, terms.length), window, full,
                    weighted(fullField, terms, weights, 0, terms.length), k, idField);
  }

  /**
   * Two steps: the {@code window} best documents for {@code first} (a query over fewer postings,
   * whose scores are lower bounds of {@code full}'s), then each of them scored by {@code full} on
   * {@code fullSearcher} (the same documents under the same docids), and the k best by that score,
   * ties to the lower docid. The hits' ids come from {@code searcher}.
   */
  public static Hits rescored(IndexSearcher searcher, Query first, int window, IndexSearcher fullSearcher,
                              Query full, int k, String idField) throws IOException {
    ScoreDoc[] found = searcher.search(first, TopScoreDocCollector.createSharedManager(window, null, window)).scoreDocs;
    int[] cand = new int[found.length];
    for (int i = 0; i < found.length; i++) {
      cand[i] = found[i].doc;
    }
    Arrays.sort(cand);  // iterators advance forward only
    float[] score = new float[cand.length];
    Weight weight = fullSearcher.createWeight(fullSearcher.rewrite(full), ScoreMode.COMPLETE, 1f);
    List<LeafReaderContext> leaves = fullSearcher.getIndexReader().leaves();
    int i = 0;
    for (LeafReaderContext leaf : leaves) {
      int end = leaf.docBase + leaf.reader().maxDoc();
      Scorer scorer = i < cand.length && cand[i] < end ? weight.scorer(leaf) : null;
      DocIdSetIterator it = scorer == null ? null : scorer.iterator();
      for (; i < cand.length && cand[i] < end; i++) {
        int local = cand[i] - leaf.docBase;
        if (it == null) {
          continue;
        }
        int doc = it.docID() >= local ? it.docID() : it.advance(local);
        if (doc == local) {
          score[i] = scorer.score();
        }
      }
    }
    Integer[] order = new Integer[cand.length];
    for (int j = 0; j < order.length; j++) {
      order[j] = j;
    }
    Arrays.sort(order, (a, b) -> score[a] != score[b] ? Float.compare(score[b], score[a]) : Integer.compare(cand[a], cand[b]));
    int n = Math.min(k, order.length);
    int[] docs = new int[n];
    float[] scores = new float[n];
    for (int j = 0; j < n; j++) {
      docs[j] = cand[order[j]];
      scores[j] = score[order[j]];
    }
    return new Hits(docs, scores, ids(searcher, docs, idField));
  }

  /**
   * Many weighted-term queries on a pool of threads: query q holds terms[starts[q]..starts[q+1]).
   * Results are in query order.
   */
  public static Hits[] impactBatch(IndexSearcher searcher, String field, String[] terms, float[] weights,
                                   int[] starts, int k, String idField, int threads) throws Exception {
    Query[] queries = new Query[starts.length - 1];
    for (int q = 0; q < queries.length; q++) {
      queries[q] = weighted(field, terms, weights, starts[q], starts[q + 1]);
    }
    return batch(searcher, queries, k, idField, threads);
  }

  /** Many queries (built by the caller) on a pool of threads, results in query order. */
  public static Hits[] batch(IndexSearcher searcher, Query[] queries, int k, String idField, int threads)
      throws Exception {
    Hits[] out = new Hits[queries.length];
    if (threads <= 1) {
      for (int q = 0; q < queries.length; q++) {
        out[q] = top(searcher, queries[q], k, idField);
      }
      return out;
    }
    ExecutorService pool = Executors.newFixedThreadPool(threads);
    try {
      List<Future<Hits>> futures = new ArrayList<>(queries.length);
      for (Query query : queries) {
        futures.add(pool.submit(() -> top(searcher, query, k, idField)));
      }
      for (int q = 0; q < queries.length; q++) {
        try {
          out[q] = futures.get(q).get();
        } catch (ExecutionException e) {
          throw e.getCause() instanceof Exception ? (Exception) e.getCause() : e;
        }
      }
    } finally {
      pool.shutdownNow();
    }
    return out;
  }

  /** Each hit's id from the id field's binary doc values, read in docid order (what doc values need). */
  private static String[] ids(IndexSearcher searcher, int[] docs, String idField) throws IOException {
    String[] ids = new String[docs.length];
    if (idField == null) {
      return ids;
    }
    Integer[] order = new Integer[docs.length];
    for (int i = 0; i < order.length; i++) {
      order[i] = i;
    }
    Arrays.sort(order, (a, b) -> Integer.compare(docs[a], docs[b]));
    List<LeafReaderContext> leaves = searcher.getIndexReader().leaves();
    LeafReaderContext leaf = null;
    BinaryDocValues values = null;
    for (int i : order) {
      int doc = docs[i];
      if (leaf == null || doc >= leaf.docBase + leaf.reader().maxDoc()) {
        leaf = leaves.get(ReaderUtil.subIndex(doc, leaves));
        values = leaf.reader().getBinaryDocValues(idField);
      }
      if (values != null && values.advanceExact(doc - leaf.docBase)) {
        ids[i] = values.binaryValue().utf8ToString();
      } else {  // no doc values (an index written without them): the stored field
        ids[i] = searcher.storedFields().document(doc).get(idField);
      }
    }
    return ids;
  }

  // --- what the index holds, for explaining hits -------------------------------------------

  /** How many documents hold each term in {@code field} (Lucene's document frequency). */
  public static int[] docFreqs(IndexSearcher searcher, String field, String[] terms) throws IOException {
    IndexReader reader = searcher.getIndexReader();
    int[] out = new int[terms.length];
    for (int i = 0; i < terms.length; i++) {
      out[i] = reader.docFreq(new Term(field, terms[i]));
    }
    return out;
  }

  /** The docid of the document whose indexed string {@code field} is each of {@code values}; -1 for none. */
  public static int[] docIds(IndexSearcher searcher, String field, String[] values) throws IOException {
    List<LeafReaderContext> leaves = searcher.getIndexReader().leaves();
    int[] out = new int[values.length];
    for (int i = 0; i < values.length; i++) {
      out[i] = -1;
      for (LeafReaderContext leaf : leaves) {
        PostingsEnum postings = leaf.reader().postings(new Term(field, values[i]), PostingsEnum.NONE);
        int doc = postings == null ? DocIdSetIterator.NO_MORE_DOCS : postings.nextDoc();
        if (doc != DocIdSetIterator.NO_MORE_DOCS) {
          out[i] = leaf.docBase + doc;
          break;
        }
      }
    }
    return out;
  }

  /**
   * Each document's frequency of each term in {@code field}, terms by rows: out[t * docs.length + d]
   * (0: not held). In an impact index a term's frequency is the integer impact the document stores.
   */
  public static int[] freqs(IndexSearcher searcher, String field, String[] terms, int[] docs) throws IOException {
    int[] out = new int[terms.length * docs.length];
    Integer[] order = new Integer[docs.length];
    for (int i = 0; i < order.length; i++) {
      order[i] = i;
    }
    Arrays.sort(order, (a, b) -> Integer.compare(docs[a], docs[b]));  // postings advance forward only
    for (LeafReaderContext leaf : searcher.getIndexReader().leaves()) {
      int base = leaf.docBase;
      int end = base + leaf.reader().maxDoc();
      for (int t = 0; t < terms.length; t++) {
        PostingsEnum postings = null;
        for (int i : order) {
          if (docs[i] < base || docs[i] >= end) {
            continue;
          }
          if (postings == null) {
            postings = leaf.reader().postings(new Term(field, terms[t]), PostingsEnum.FREQS);
            if (postings == null) {
              break;
            }
          }
          int local = docs[i] - base;
          int doc = postings.docID() >= local ? postings.docID() : postings.advance(local);
          if (doc == DocIdSetIterator.NO_MORE_DOCS) {
            break;
          }
          if (doc == local) {
            out[t * docs.length + i] = postings.freq();
          }
        }
      }
    }
    return out;
  }

  /** The score the searcher gives document {@code doc} for {@code query} (its explanation's value). */
  public static float score(IndexSearcher searcher, Query query, int doc) throws IOException {
    return searcher.explain(query, doc).getValue().floatValue();
  }
}
