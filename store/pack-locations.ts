/** Where packed blobs are, by digest, read again on a miss (store/pack-index.ts, store/s3/packs.ts). */

/** A digest → location map refreshed by one pass that concurrent callers share. */
export abstract class PackLocations<L> {
  protected readonly where = new Map<string, L>();
  private refreshing: Promise<void> | undefined;

  /** Where `digest` is, refreshing on a miss. */
  async locate(digest: string): Promise<L | undefined> {
    const hit = this.where.get(digest);
    if (hit) return hit;
    await this.refresh();
    return this.where.get(digest);
  }

  /** Reads what was added since the last refresh; concurrent callers share one pass. */
  refresh(): Promise<void> {
    this.refreshing ??= this.refreshOnce().finally(() => {
      this.refreshing = undefined;
    });
    return this.refreshing;
  }

  protected abstract refreshOnce(): Promise<void>;
}
