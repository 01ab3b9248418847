import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { contextHeader, encodingText, encodingTexts } from '../../compute/chunk/context.ts'
import { chunkDocument, CHUNKING_DEFAULTS } from '../../compute/chunk/index.ts'

describe('encoding text of a chunk', () => {
  it('puts the title before chunks after the first, unless the chunk already starts with it', () => {
    assert.equal(encodingText('Later text.', 500, 'Guide'), 'Guide\n\nLater text.')
    assert.equal(encodingText('Guide\n\nOpening.', 0, 'Guide'), 'Guide\n\nOpening.')
    assert.equal(encodingText('Opening without title.', 0, 'Guide'), 'Opening without title.')
    assert.equal(encodingText('Guide, continued.', 40, 'Guide'), 'Guide, continued.')
    assert.equal(encodingText('Later.', 40, '  '), 'Later.')
    assert.equal(encodingText('Later.', 40, undefined), 'Later.')
    assert.equal(encodingText('Later.', 40, ' Guide \n'), 'Guide\n\nLater.')
    assert.deepEqual(encodingTexts([{ text: 'a', start: 0 }, { text: 'b', start: 9 }], 'T'), ['a', 'T\n\nb'])
  })
  it('takes a heading-like opening line as the header, else the title', () => {
    assert.equal(contextHeader('Glacier survey\n\nBody text here.', 'doc-0001'), 'Glacier survey')
    assert.equal(contextHeader('\n  Glacier survey\n\nBody.', 'doc-0001'), 'Glacier survey')
    assert.equal(contextHeader('A first paragraph\nthat wraps.\n\nMore.', 'Report'), 'Report', 'two lines are a paragraph')
    assert.equal(contextHeader(`${'x'.repeat(201)}\n\nMore.`, 'Report'), 'Report', 'too long for a heading')
    assert.equal(contextHeader('Only one block of text.', 'Report'), 'Report')
    assert.equal(contextHeader('Heading\n\n', 'Report'), 'Report', 'nothing below it')
    assert.equal(contextHeader('', undefined), '')
  })
})

describe('header context across pages', () => {
  it('encodes the chunks of every later page with the heading of the first page', () => {
    const pages = [
      { page_num: 1, page_label: '1', text: 'Glacier survey\n\nGlaciers carve valleys as the ice creeps downhill.' },
      { page_num: 2, page_label: '2', text: 'Moraines mark where the ice once stopped, long ago.' },
      { page_num: 3, page_label: '3', text: 'Meltwater lakes form behind the moraines each summer.' },
    ]
    const { chunks } = chunkDocument(pages, { ...CHUNKING_DEFAULTS })
    assert.deepEqual(chunks.map((c) => c.page_num), [1, 2, 3], 'one chunk per page')
    const header = contextHeader(pages[0].text, 'survey.pdf')
    assert.equal(header, 'Glacier survey')
    assert.deepEqual(encodingTexts(chunks, header), [pages[0].text, `Glacier survey\n\n${pages[1].text}`, `Glacier survey\n\n${pages[2].text}`])
  })
})
