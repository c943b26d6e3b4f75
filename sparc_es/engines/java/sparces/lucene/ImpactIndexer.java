/*
 * sparc-es: write a Lucene impact index from JsonVectorCollection records, on several threads.
 *
 * Each record {"id": ..., "vector": {token: impact, ...}, ...} becomes one document: a stored
 * "id" (with binary doc values, as Anserini writes it) and a "contents" field whose terms are the
 * tokens with their impacts as term frequencies (no norms: the impact similarity ignores them).
 * The file is cut into one byte range per thread at line boundaries; each thread parses its range
 * with Jackson's streaming parser into its own IndexWriter and merges it to one segment; the parts
 * are then appended in range order and merged, so docids are input order (ties in score go to the
 * earlier sentence, as in exact scoring). One writer shared by the threads would interleave their
 * documents, and sorting them back (an index sort) made the final merge four times slower.
 */
package sparces.lucene;

import java.io.IOException;
import java.io.InputStream;
import java.io.RandomAccessFile;
import java.nio.channels.Channels;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import org.apache.lucene.analysis.TokenStream;
import org.apache.lucene.analysis.tokenattributes.CharTermAttribute;
import org.apache.lucene.analysis.tokenattributes.TermFrequencyAttribute;
import org.apache.lucene.document.BinaryDocValuesField;
import org.apache.lucene.document.Document;
import org.apache.lucene.document.Field;
import org.apache.lucene.document.FieldType;
import org.apache.lucene.document.StringField;
import org.apache.lucene.index.IndexOptions;
import org.apache.lucene.index.IndexWriter;
import org.apache.lucene.index.IndexWriterConfig;
import org.apache.lucene.index.LogByteSizeMergePolicy;
import org.apache.lucene.search.similarities.Similarity;
import org.apache.lucene.store.FSDirectory;
import org.apache.lucene.util.BytesRef;

public final class ImpactIndexer {
  private static final JsonFactory JSON = new JsonFactory();

  private ImpactIndexer() {}

  /** A bad record: the message names it by its line in the file. */
  public static final class BadRecord extends IOException {
    private static final long serialVersionUID = 1L;

    BadRecord(String message) {
      super(message);
    }
  }

  /** Thrown by an index run whose stop flag was set. */
  public static final class Stopped extends IOException {
    private static final long serialVersionUID = 1L;

    Stopped() {
      super("stopped");
    }
  }

  // Set from another thread (Python's, on Ctrl-C), one flag a run: its writers stop at their next
  // record, before a merge and before the join; Python's own signal handler cannot run while this
  // class runs.
  private static void stopIfAsked(AtomicBoolean stop) throws Stopped {
    if (stop.get()) {
      throw new Stopped();
    }
  }

  /** Tokens with their term frequencies, handed straight to Lucene's inverter. */
  private static final class Impacts extends TokenStream {
    private final CharTermAttribute term = addAttribute(CharTermAttribute.class);
    private final TermFrequencyAttribute frequency = addAttribute(TermFrequencyAttribute.class);
    private final List<String> tokens = new ArrayList<>();
    private final List<Integer> impacts = new ArrayList<>();
    private int next;

    void clear() {
      tokens.clear();
      impacts.clear();
    }

    void add(String token, int impact) {
      tokens.add(token);
      impacts.add(impact);
    }

    boolean isEmpty() {
      return tokens.isEmpty();
    }

    @Override
    public boolean incrementToken() {
      if (next == tokens.size()) {
        return false;
      }
      clearAttributes();
      term.setEmpty().append(tokens.get(next));
      frequency.setTermFrequency(impacts.get(next));
      next++;
      return true;
    }

    @Override
    public void reset() throws IOException {
      super.reset();
      next = 0;
    }
  }

  /**
   * Index {@code vectors} into a new index at {@code indexDir}; returns the number of documents.
   * Records whose vector has no positive impact are skipped (Lucene keeps no document without terms).
   * With {@code progress}, a count of the documents added (of {@code total}) is shown on stderr.
   */
  public static long index(String vectors, String indexDir, Similarity similarity, int threads, double ramBufferMB,
                           long total, boolean progress, AtomicBoolean stop) throws Exception {
    long[] starts = ranges(vectors, Math.max(1, threads));
    int parts = starts.length - 1;
    // Each writer buffers up to ramBufferMB before it flushes a segment: keep them all within a
    // quarter of the heap, whatever the machine.
    double heapMB = Runtime.getRuntime().maxMemory() / (1024.0 * 1024.0);
    double bufferMB = Math.max(16.0, Math.min(ramBufferMB, heapMB / 4 / parts));
    AtomicLong documents = new AtomicLong();
    Thread reporter = progress ? reporter(documents, total) : null;
    Path index = Paths.get(indexDir);
    Path[] partDirs = new Path[parts];
    for (int r = 0; r < parts; r++) {
      partDirs[r] = parts == 1 ? index : index.resolveSibling(index.getFileName() + ".part-" + r);
    }
    ExecutorService pool = Executors.newFixedThreadPool(parts);
    try {
      List<Future<Long>> running = new ArrayList<>();
      for (int r = 0; r < parts; r++) {
        final int range = r;
        running.add(pool.submit(() -> {
          try (IndexWriter writer = new IndexWriter(FSDirectory.open(partDirs[range]),
                                                    config(similarity, bufferMB))) {
            long added = indexRange(vectors, starts, range, writer, documents, stop);
            stopIfAsked(stop);
            writer.forceMerge(1);
            writer.commit();
            return added;
          }
        }));
      }
      for (Future<Long> part : running) {
        try {
          part.get();
        } catch (ExecutionException e) {
          throw e.getCause() instanceof Exception ? (Exception) e.getCause() : e;
        }
      }
    } finally {
      pool.shutdownNow();
      // a part still merging or closing its writer (another part stopped or failed first) ends
      // before this returns: nothing writes behind the caller's cleanup
      while (!pool.awaitTermination(1, TimeUnit.SECONDS)) {
        // waiting
      }
      if (reporter != null) {
        reporter.interrupt();
        reporter.join();
      }
    }
    stopIfAsked(stop);
    if (parts > 1) {
      long merging = System.nanoTime();
      if (progress) {
        System.err.println("index: joining " + parts + " parts in order ...");
      }
      try (IndexWriter writer = new IndexWriter(FSDirectory.open(index), config(similarity, bufferMB))) {
        FSDirectory[] dirs = new FSDirectory[parts];
        for (int r = 0; r < parts; r++) {
          dirs[r] = FSDirectory.open(partDirs[r]);
        }
        writer.addIndexes(dirs);  // appended in range order: docids stay input order
        writer.forceMerge(1);
        writer.commit();
        for (FSDirectory dir : dirs) {
          dir.close();
        }
      }
      for (Path dir : partDirs) {
        try (var files = Files.walk(dir)) {
          files.sorted(java.util.Comparator.reverseOrder()).forEach(f -> f.toFile().delete());
        }
      }
      if (progress) {
        System.err.println(String.format("index: joined in %.1f s", (System.nanoTime() - merging) / 1e9));
      }
    }
    return documents.get();
  }

  /** One writer's settings: merges of adjacent segments only, so docids keep the order of addition. */
  private static IndexWriterConfig config(Similarity similarity, double ramBufferMB) {
    IndexWriterConfig config = new IndexWriterConfig();
    config.setSimilarity(similarity);
    config.setRAMBufferSizeMB(ramBufferMB);
    config.setUseCompoundFile(false);
    config.setMergePolicy(new LogByteSizeMergePolicy());
    return config;
  }

  private static Thread reporter(AtomicLong documents, long total) {
    Thread thread = new Thread(() -> {
      long started = System.nanoTime();
      boolean running = true;
      while (running) {
        try {
          Thread.sleep(1000);
        } catch (InterruptedException e) {
          running = false;
        }
        double seconds = (System.nanoTime() - started) / 1e9;
        long done = documents.get();
        System.err.print(String.format("\rindex: %,d%s sentences, %,.0f/s ", done,
            total > 0 ? String.format(" of %,d", total) : "", done / Math.max(seconds, 1e-9)));
      }
      System.err.println();
    });
    thread.setDaemon(true);
    thread.start();
    return thread;
  }

  /** Byte offsets that cut the file into {@code parts} ranges, each starting at a line. */
  private static long[] ranges(String path, int parts) throws IOException {
    try (RandomAccessFile file = new RandomAccessFile(path, "r")) {
      long length = file.length();
      List<Long> starts = new ArrayList<>();
      starts.add(0L);
      for (int p = 1; p < parts; p++) {
        long at = Math.max(starts.get(starts.size() - 1), length * p / parts);
        file.seek(at);
        if (at > 0) {  // step back one byte: a range that starts right after a newline keeps its line
          file.seek(at - 1);
          int c;
          while ((c = file.read()) != -1 && c != '\n') {
            // skip to the start of the next line
          }
        }
        long start = file.getFilePointer();
        if (start < length && start > starts.get(starts.size() - 1)) {
          starts.add(start);
        }
      }
      starts.add(length);
      long[] out = new long[starts.size()];
      for (int i = 0; i < out.length; i++) {
        out[i] = starts.get(i);
      }
      return out;
    }
  }

  private static long indexRange(String path, long[] starts, int range, IndexWriter writer, AtomicLong added,
                                 AtomicBoolean stop) throws IOException {
    FieldType contentsType = new FieldType();
    contentsType.setIndexOptions(IndexOptions.DOCS_AND_FREQS);
    contentsType.setTokenized(true);
    contentsType.setOmitNorms(true);
    contentsType.freeze();
    Impacts impacts = new Impacts();
    StringField id = new StringField("id", "", Field.Store.YES);
    BinaryDocValuesField idOrder = new BinaryDocValuesField("id", new BytesRef());
    Document document = new Document();
    document.add(id);
    document.add(idOrder);
    document.add(new Field("contents", impacts, contentsType));

    long documents = 0;
    long line = 0;
    try (RandomAccessFile file = new RandomAccessFile(path, "r")) {
      file.seek(starts[range]);
      InputStream in = new BoundedInput(Channels.newInputStream(file.getChannel()), starts[range + 1] - starts[range]);
      try (JsonParser parser = JSON.createParser(in)) {
        JsonToken token;
        while ((token = parser.nextToken()) != null) {
          stopIfAsked(stop);
          String sentenceId = null;
          impacts.clear();
          try {
            if (token != JsonToken.START_OBJECT) {
              throw new IllegalArgumentException("not a JSON object");
            }
            while (parser.nextToken() == JsonToken.FIELD_NAME) {
              String name = parser.currentName();
              JsonToken value = parser.nextToken();
              if ("id".equals(name) && value == JsonToken.VALUE_STRING) {
                sentenceId = parser.getText();
              } else if ("vector".equals(name)) {
                if (value != JsonToken.START_OBJECT) {
                  throw new IllegalArgumentException("\"vector\" is not an object");
                }
                while (parser.nextToken() == JsonToken.FIELD_NAME) {
                  String tokenText = parser.currentName();
                  if (parser.nextToken() != JsonToken.VALUE_NUMBER_INT) {
                    throw new IllegalArgumentException("the impact of \"" + tokenText + "\" is not an integer");
                  }
                  int impact = parser.getIntValue();
                  if (impact > 0) {  // non-positive impacts dropped, as Anserini does
                    impacts.add(tokenText, impact);
                  }
                }
              } else {
                parser.skipChildren();
              }
            }
            if (sentenceId == null) {
              throw new IllegalArgumentException("no \"id\" string");
            }
          } catch (IllegalArgumentException | com.fasterxml.jackson.core.JsonProcessingException e) {
            throw new BadRecord("line " + (linesBefore(path, starts[range]) + line + 1) + ": not an impact record ("
                + e.getMessage().split("\n")[0] + ")");
          }
          if (!impacts.isEmpty()) {
            id.setStringValue(sentenceId);
            idOrder.setBytesValue(new BytesRef(sentenceId));
            writer.addDocument(document);
            documents++;
            added.incrementAndGet();
          }
          line++;
        }
      } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
        throw new BadRecord("line " + (linesBefore(path, starts[range]) + line + 1) + ": not an impact record ("
            + e.getOriginalMessage() + ")");
      }
    }
    return documents;
  }

  /** How many lines the file holds before byte {@code offset} (only to name a bad record). */
  private static long linesBefore(String path, long offset) throws IOException {
    long lines = 0;
    try (InputStream in = new BoundedInput(new java.io.FileInputStream(path), offset)) {
      byte[] buffer = new byte[1 << 16];
      int n;
      while ((n = in.read(buffer)) > 0) {
        for (int i = 0; i < n; i++) {
          if (buffer[i] == '\n') {
            lines++;
          }
        }
      }
    }
    return lines;
  }

  /** At most {@code limit} bytes of a stream. */
  private static final class BoundedInput extends InputStream {
    private final InputStream in;
    private long left;

    BoundedInput(InputStream in, long limit) {
      this.in = new java.io.BufferedInputStream(in, 1 << 16);
      this.left = limit;
    }

    @Override
    public int read() throws IOException {
      if (left <= 0) {
        return -1;
      }
      int c = in.read();
      if (c >= 0) {
        left--;
      }
      return c;
    }

    @Override
    public int read(byte[] b, int off, int len) throws IOException {
      if (left <= 0) {
        return -1;
      }
      int n = in.read(b, off, (int) Math.min(len, left));
      if (n > 0) {
        left -= n;
      }
      return n;
    }

    @Override
    public void close() throws IOException {
      in.close();
    }
  }
}
