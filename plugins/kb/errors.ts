// Errors about a knowledge base's existence and state, with the texts clients match on (notes.md). A module of
// its own so that authz (which no plugin may make depend on kb) and connectors answer with the same texts.
import { clip, forbidden, notFound } from '../../kernel/errors.ts'

export const kbNotFound = (kbId: string) => notFound(`KB not found: ${clip(kbId)}`, 'KB_NOT_FOUND')
/** [ENT] A frozen KB (its owner left and no admin could succeed) refuses every write above viewer. */
export const kbFrozen = (kbId: string) => forbidden(`KB is frozen: ${clip(kbId)}`, 'AUTHZ_KB_FROZEN')
