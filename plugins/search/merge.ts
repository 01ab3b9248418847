// Parent-child auto-merge (spec 2.9 retrieval.auto_merge, chunking hierarchical): when the share of a parent's
// children among the retrieved chunks reaches merge_threshold, the parent's text replaces them. With three or
// more levels the merge climbs while each level passes; a level that fails is not retried higher.
import type { SqlRunner } from '../../adapters/ports.ts'
import type { Ranked } from './fusion.ts'

export interface ParentRow {
  chunk_id: string
  parent_chunk_id: string | null
  child_count: number
  text: string
  page_num: number
  page_label: string
  start_offset: number
  end_offset: number
}

export interface MergeItem extends Ranked {
  merged: boolean
}

export type ParentLoader = (ids: readonly string[]) => Promise<Map<string, ParentRow>>

export const sqlParentLoader = (db: SqlRunner): ParentLoader => async (ids) => {
  const rows = await db.query<ParentRow>(
    `SELECT chunk_id, parent_chunk_id, child_count, text, page_num, page_label, start_offset, end_offset
     FROM parent_chunks WHERE chunk_id = ANY($1::text[])`, [ids as string[]])
  return new Map(rows.map((r) => [r.chunk_id, r]))
}

/** Merges one KB's ranked list; keeps the list order (a merged parent takes the place of its best child). */
export async function autoMerge(list: readonly Ranked[], threshold: number, load: ParentLoader): Promise<MergeItem[]> {
  let items: MergeItem[] = list.map((r) => ({ ...r, merged: false }))
  // Items that may still climb: leaves at first, then the parents merged at the level below.
  let climbing = new Set(items.filter((i) => i.hit.payload.parent_chunk_id !== null))
  while (climbing.size > 0) {
    const groups = new Map<string, MergeItem[]>()
    for (const item of climbing) {
      const parentId = item.hit.payload.parent_chunk_id
      if (parentId) (groups.get(parentId) ?? groups.set(parentId, []).get(parentId)!).push(item)
    }
    if (groups.size === 0) break
    const parents = await load([...groups.keys()])
    const next = new Set<MergeItem>()
    const replaced = new Map<MergeItem, MergeItem | null>()
    for (const [parentId, children] of groups) {
      const parent = parents.get(parentId)
      if (!parent || parent.child_count <= 0 || children.length / parent.child_count < threshold) continue
      const best = children.reduce((a, b) => (b.score > a.score ? b : a))
      const merged: MergeItem = {
        score: best.score,
        merged: true,
        hit: {
          id: parent.chunk_id,
          payload: {
            ...best.hit.payload,
            chunk_id: parent.chunk_id,
            chunk_index: -1,
            text: parent.text,
            page_num: parent.page_num,
            page_label: parent.page_label,
            start: parent.start_offset,
            end: parent.end_offset,
            parent_chunk_id: parent.parent_chunk_id,
          },
        },
      }
      for (const c of children) replaced.set(c, c === best ? merged : null)
      if (parent.parent_chunk_id) next.add(merged)
    }
    if (replaced.size === 0) break
    items = items.flatMap((i) => {
      if (!replaced.has(i)) return [i]
      const r = replaced.get(i)
      return r ? [r] : []
    })
    climbing = next
  }
  return items
}
