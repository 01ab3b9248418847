import { Type } from '@sinclair/typebox'
import { KbId, Timestamp } from '../../kernel/schemas.ts'
import { AnyRole as Role } from '../authz/member-schemas.ts'
import { KB_SORT_COLUMNS, VISIBILITIES } from './service.ts'

const Visibility = Type.Union(VISIBILITIES.map((v) => Type.Literal(v)), {
  description: "'private' (default) or 'public'. [ENT] Every authenticated caller reads a public KB as viewer; writes still need membership.",
})

const Description = Type.Union([Type.String({ maxLength: 10000 }), Type.Null()], { description: 'Free text; null (or absent) for none.' })

export const KnowledgeBase = Type.Object({
  kb_id: Type.String(),
  kb_name: Type.String(),
  description: Type.Union([Type.String(), Type.Null()]),
  tags: Type.Array(Type.String()),
  status: Type.String({ description: "'active'; [ENT] 'frozen' when its owner left and no admin could succeed (writes refused)" }),
  visibility: Visibility,
  created_at: Timestamp,
  updated_at: Timestamp,
  my_role: Type.Optional(Type.Union([Role, Type.Null()], { description: "[ENT] The caller's role, when kb_authz_enabled is true (public KB without membership: viewer)." })),
}, { title: 'KnowledgeBase' })

export const KnowledgeBaseList = Type.Object({ knowledge_bases: Type.Array(KnowledgeBase) })

export const KbListQuery = Type.Object({
  sort_by: Type.Union(KB_SORT_COLUMNS.map((c) => Type.Literal(c)), { description: 'Sort column.', default: 'kb_id' }),
  sort_order: Type.Union([Type.Literal('asc'), Type.Literal('desc')], { description: 'Sort direction.', default: 'asc' }),
})

export const CreateKbBody = Type.Object({
  kb_id: KbId,
  kb_name: Type.Optional(Type.String({ maxLength: 500 })),
  description: Type.Optional(Description),
  tags: Type.Optional(Type.Array(Type.String({ maxLength: 200 }), { maxItems: 100 })),
  visibility: Type.Optional(Visibility),
})

export const PatchKbBody = Type.Object({
  kb_name: Type.Optional(Type.String({ maxLength: 500 })),
  description: Type.Optional(Description),
  tags: Type.Optional(Type.Array(Type.String({ maxLength: 200 }), { maxItems: 100 })),
  visibility: Type.Optional(Visibility),
})

export const KbStatusResponse = Type.Object({ kb_id: Type.String(), status: Type.String() })
export const KbDeletedResponse = Type.Object({ kb_id: Type.String(), status: Type.Literal('deleted'), s3_objects_deleted: Type.Integer() })

const AnyValue = Type.Unknown()
export const OverridesBody = Type.Object({ overrides: Type.Record(Type.String(), AnyValue) })
export const OverridesResponse = Type.Object({ overrides: Type.Record(Type.String(), AnyValue) })
export const OverridesWriteResponse = Type.Object({ kb_id: Type.String(), overrides: Type.Record(Type.String(), AnyValue) })

export const SchemaEntry = Type.Object({
  type: Type.String(),
  enum: Type.Union([Type.Array(AnyValue), Type.Null()], { description: 'Allowed values; null unless the type is enum.' }),
  default: AnyValue,
  min: Type.Union([Type.Number(), Type.Null()], { description: 'Lowest value; null when not numeric.' }),
  max: Type.Union([Type.Number(), Type.Null()], { description: 'Highest value; null when not numeric.' }),
  overridable: Type.Boolean(),
  description: Type.String({ description: "Short form label, such as 'Chunk Size'." }),
  group: Type.String({ description: "The section the key lives in: 'chunking', 'auto_merge', 'hybrid', ..." }),
  help: Type.String({ description: 'What the setting does (Quarry addition).' }),
})
export const SettingsSchemaResponse = Type.Object({ schema: Type.Record(Type.String(), SchemaEntry) })
export const EffectiveSettings = Type.Object({
  ingestion: Type.Record(Type.String(), AnyValue),
  chunking: Type.Record(Type.String(), AnyValue),
  dedup: Type.Record(Type.String(), AnyValue),
  retrieval: Type.Record(Type.String(), AnyValue),
})
