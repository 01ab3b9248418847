import { Type } from '@sinclair/typebox'
import { KbId, Timestamp } from '../../kernel/schemas.ts'

export const KnowledgeBase = Type.Object({
  kb_id: Type.String(),
  kb_name: Type.String(),
  description: Type.String(),
  tags: Type.Array(Type.String()),
  status: Type.String({ description: "'active'" }),
  created_at: Timestamp,
  updated_at: Timestamp,
}, { title: 'KnowledgeBase' })

export const KnowledgeBaseList = Type.Object({ knowledge_bases: Type.Array(KnowledgeBase) })

export const CreateKbBody = Type.Object({
  kb_id: KbId,
  kb_name: Type.Optional(Type.String({ maxLength: 500 })),
  description: Type.Optional(Type.String({ maxLength: 10000 })),
  tags: Type.Optional(Type.Array(Type.String({ maxLength: 200 }), { maxItems: 100 })),
})

export const PatchKbBody = Type.Object({
  kb_name: Type.Optional(Type.String({ maxLength: 500 })),
  description: Type.Optional(Type.String({ maxLength: 10000 })),
  tags: Type.Optional(Type.Array(Type.String({ maxLength: 200 }), { maxItems: 100 })),
})

export const KbStatusResponse = Type.Object({ kb_id: Type.String(), status: Type.String() })
export const KbDeletedResponse = Type.Object({ kb_id: Type.String(), status: Type.Literal('deleted'), s3_objects_deleted: Type.Integer() })

const AnyValue = Type.Unknown()
export const OverridesBody = Type.Object({ overrides: Type.Record(Type.String(), AnyValue) })
export const OverridesResponse = Type.Object({ overrides: Type.Record(Type.String(), AnyValue) })
export const OverridesWriteResponse = Type.Object({ kb_id: Type.String(), overrides: Type.Record(Type.String(), AnyValue) })

export const SchemaEntry = Type.Object({
  type: Type.String(),
  enum: Type.Optional(Type.Array(AnyValue)),
  default: AnyValue,
  min: Type.Optional(Type.Number()),
  max: Type.Optional(Type.Number()),
  overridable: Type.Boolean(),
  description: Type.String(),
  group: Type.String(),
})
export const SettingsSchemaResponse = Type.Object({ schema: Type.Record(Type.String(), SchemaEntry) })
export const EffectiveSettings = Type.Object({
  ingestion: Type.Record(Type.String(), AnyValue),
  chunking: Type.Record(Type.String(), AnyValue),
  dedup: Type.Record(Type.String(), AnyValue),
  retrieval: Type.Record(Type.String(), AnyValue),
})
