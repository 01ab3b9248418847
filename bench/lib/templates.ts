// Documents written from one template (issue 36): the usual shape of a company's knowledge base (one page per
// fault code, product model, release, office, API endpoint, country policy) and of every crawled site. Members of
// a family share most of their words and differ in identity-bearing tokens (codes, numbers, names) put into the
// same slots, plus a short passage of their own. Used by the dedup quality bench and the dedup tests.
import { mulberry32 } from './rng.ts'

export interface TemplatedDoc {
  /** File name (uploads) or path (crawled pages). */
  name: string
  /** The title a reader would give it (what the parser should find). */
  title: string
  /** The file's content: plain text, Markdown or HTML. */
  content: string
  kind: 'txt' | 'md' | 'html'
  /** A token only this member holds (searchable): its code, model, version, city, endpoint or country. */
  marker: string
}

export interface Family {
  name: string
  kind: TemplatedDoc['kind']
  /** short: a few hundred characters; long: a few thousand. */
  length: 'short' | 'long'
  members: TemplatedDoc[]
}

const FAULTS = ['overheating of the drive unit', 'a blocked cooling fan', 'low supply voltage', 'a worn drive belt', 'a failed temperature sensor',
  'a loose encoder cable', 'moisture in the control cabinet', 'a stalled feed motor', 'a tripped safety relay', 'a clogged air filter',
  'an open door interlock', 'a lost network link', 'a jammed paper path', 'a full waste container', 'an empty coolant tank', 'a bent guide rail']
const CITIES = ['Berlin', 'Paris', 'Madrid', 'Lisbon', 'Vienna', 'Prague', 'Warsaw', 'Oslo', 'Dublin', 'Zurich', 'Milan', 'Athens', 'Helsinki',
  'Tallinn', 'Riga', 'Vilnius', 'Sofia', 'Zagreb', 'Bratislava', 'Budapest', 'Bucharest', 'Copenhagen', 'Stockholm', 'Brussels', 'Amsterdam',
  'Luxembourg', 'Valletta', 'Nicosia', 'Ljubljana', 'Reykjavik', 'Seoul', 'Busan', 'Tokyo', 'Osaka', 'Toronto', 'Montreal', 'Denver',
  'Austin', 'Boston', 'Chicago', 'Seattle', 'Sydney', 'Perth', 'Auckland', 'Lima', 'Quito']
const PEOPLE = ['Alice Moreau', 'Bruno Silva', 'Chen Wei', 'Dana Kowalski', 'Emeka Obi', 'Farah Haddad', 'Goran Petrovic', 'Hana Sato',
  'Ivan Novak', 'Julia Berg', 'Kofi Mensah', 'Lena Fischer', 'Marco Rossi', 'Nadia Karim', 'Omar Aziz', 'Priya Nair', 'Quinn Walsh',
  'Rosa Diaz', 'Sven Larsen', 'Tariq Khan', 'Uma Patel', 'Viktor Horvat', 'Wen Li', 'Ximena Cruz', 'Yusuf Demir', 'Zara Ahmed',
  'Anna Lind', 'Ben Carter', 'Clara Vogel', 'David Cohen', 'Elena Popescu', 'Felix Wagner', 'Grace Kim', 'Hugo Laurent', 'Ines Costa',
  'Jonas Meyer', 'Kira Ivanova', 'Liam Byrne', 'Maya Singh', 'Noah Baker', 'Olga Sokolova', 'Pablo Ruiz', 'Rina Tanaka']
const COUNTRIES = ['Germany', 'France', 'Spain', 'Portugal', 'Austria', 'Czechia', 'Poland', 'Norway', 'Ireland', 'Switzerland', 'Italy',
  'Greece', 'Finland', 'Estonia', 'Latvia', 'Lithuania', 'Bulgaria', 'Croatia', 'Slovakia', 'Hungary', 'Romania', 'Denmark', 'Sweden',
  'Belgium', 'Netherlands', 'Luxembourg', 'Malta', 'Cyprus', 'Slovenia', 'Iceland', 'Korea', 'Japan', 'Canada', 'Mexico', 'Brazil',
  'Chile', 'Peru', 'Australia', 'Zealand', 'India', 'Kenya', 'Ghana']
const RESOURCES = ['orders', 'invoices', 'customers', 'shipments', 'products', 'refunds', 'coupons', 'carts', 'payments', 'reviews', 'suppliers',
  'warehouses', 'returns', 'subscriptions', 'tickets', 'agents', 'teams', 'projects', 'tasks', 'comments', 'labels', 'webhooks', 'tokens',
  'sessions', 'reports', 'exports', 'imports', 'audits', 'roles', 'policies', 'devices', 'sensors', 'alerts', 'metrics', 'dashboards',
  'notes', 'files', 'folders', 'tags', 'events', 'schedules', 'locations']
const FEATURES = ['faster start-up on cold caches', 'a new export to CSV', 'single sign-on through SAML', 'dark mode in the editor',
  'bulk editing of records', 'an audit log for every change', 'retries for failed webhooks', 'a search box in the settings',
  'offline mode for the mobile app', 'keyboard shortcuts for navigation', 'a REST endpoint for usage figures', 'two-factor login by app',
  'smaller backups through compression', 'a calendar view of deadlines', 'per-team quotas', 'scheduled reports by e-mail']
const TOPICS = ['payroll', 'travel', 'expenses', 'laptops', 'parking', 'badges', 'benefits', 'training', 'recruiting', 'vacations']

const pick = <T>(xs: readonly T[], r: () => number): T => xs[Math.floor(r() * xs.length)]
const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')

/** Shared boilerplate of a family: sentences every member repeats word for word. */
function boilerplate(seed: number, sentences: number, vocabulary: readonly string[]): string {
  const r = mulberry32(seed)
  const out: string[] = []
  for (let i = 0; i < sentences; i++) {
    const words = Array.from({ length: 9 + Math.floor(r() * 12) }, () => pick(vocabulary, r))
    out.push(`${words[0][0].toUpperCase()}${words[0].slice(1)} ${words.slice(1).join(' ')}.`)
  }
  return out.join(' ')
}

const COMMON = ('the a of to and in for on with at by from as is are be this that it its must should can will all any each every when ' +
  'before after during until unit system operator service check replace restart inspect record report contact support manual procedure ' +
  'step safety power cable panel screen button setting value level limit warning error message log customer account team office policy ' +
  'request approval manager document version release update install upgrade data backup network access user password page menu').split(' ')

/** One family per template: `members` documents each. */
export function templateFamilies(members = 40, seed = 36): Family[] {
  const r = mulberry32(seed)
  const codes = new Set<string>()
  while (codes.size < members) codes.add(`E${String(100 + Math.floor(r() * 900))}`)
  const faultCodes = [...codes]
  const families: Family[] = []

  // 1. Fault pages (plain text, short): each names its own fault code and its own fault; the procedure is shared.
  const procedure = boilerplate(seed + 1, 5, COMMON)
  families.push({
    name: 'fault pages', kind: 'txt', length: 'short',
    members: faultCodes.map((code, i) => {
      const fault = FAULTS[i % FAULTS.length]
      const text = `Fault ${code}\n\nFault code ${code} indicates ${fault}. The unit shows ${code} on the front panel and stops the feed.\n\n` +
        `${procedure}\n\nIf ${code} appears again within 24 hours, call the service desk and quote ${code}.`
      return { name: `fault-${code.toLowerCase()}.txt`, title: `fault-${code.toLowerCase()}`, content: text, kind: 'txt' as const, marker: code }
    }),
  })

  // 2. Product datasheets (HTML, long): a crawled catalogue of one layout, menu and footer around each page.
  const menu = '<nav><ul><li><a href="/">Home</a></li><li><a href="/products">Products</a></li><li><a href="/support">Support</a></li>' +
    '<li><a href="/downloads">Downloads</a></li><li><a href="/contact">Contact us</a></li></ul></nav>'
  const footer = `<footer><p>${boilerplate(seed + 2, 3, COMMON)}</p><p>Copyright 2026 Acme Industrial. All rights reserved.</p></footer>`
  const safety = boilerplate(seed + 3, 14, COMMON)
  const warranty = boilerplate(seed + 4, 10, COMMON)
  families.push({
    name: 'product datasheets', kind: 'html', length: 'long',
    members: Array.from({ length: members }, (_, i) => {
      const model = `${'KLMRSTVXZ'[i % 9]}${200 + i * 15}`
      const weight = 8 + ((i * 7) % 40)
      const power = 150 + i * 25
      const width = 400 + ((i * 13) % 300)
      const own = boilerplate(seed + 100 + i, 2, COMMON)
      const body = `<h1>Acme ${model} datasheet</h1><p>The ${model} is a ${pick(['compact', 'rugged', 'quiet', 'modular', 'portable'], r)} ` +
        `machine for ${pick(['workshops', 'labs', 'warehouses', 'print shops', 'kitchens'], r)}. ${own}</p>` +
        `<table><tr><th>Model</th><td>${model}</td></tr><tr><th>Weight</th><td>${weight} kg</td></tr>` +
        `<tr><th>Power</th><td>${power} W</td></tr><tr><th>Width</th><td>${width} mm</td></tr></table>` +
        `<h2>Safety</h2><p>${safety}</p><h2>Warranty</h2><p>${warranty}</p><p>Order the ${model} through your Acme dealer.</p>`
      const html = `<!doctype html><html><head><title>Acme ${model} datasheet | Acme Industrial</title></head><body>${menu}<main>${body}</main>${footer}</body></html>`
      return { name: `products/${model.toLowerCase()}.html`, title: `Acme ${model} datasheet | Acme Industrial`, content: html, kind: 'html' as const, marker: model }
    }),
  })

  // 3. Release notes (Markdown, long): one per version, mostly the same upgrade boilerplate.
  const upgrade = boilerplate(seed + 5, 16, COMMON)
  families.push({
    name: 'release notes', kind: 'md', length: 'long',
    members: Array.from({ length: members }, (_, i) => {
      const version = `${3 + Math.floor(i / 12)}.${i % 12}.${(i * 3) % 5}`
      const month = String(1 + (i % 12)).padStart(2, '0')
      const highlights = [FEATURES[i % FEATURES.length], FEATURES[(i * 5 + 3) % FEATURES.length]]
      const text = `# Release notes ${version}\n\nVersion ${version} was released on 2026-${month}-${String(1 + (i % 28)).padStart(2, '0')}.\n\n` +
        `## Highlights\n\n- ${highlights[0]}\n- ${highlights[1]}\n\n## Upgrading\n\n${upgrade}\n\nUpgrade to ${version} with the installer of ${version} only.\n`
      return { name: `release-${version}.md`, title: `Release notes ${version}`, content: text, kind: 'md' as const, marker: version }
    }),
  })

  // 4. Office pages (Markdown, short): city, address, phone and manager differ.
  const officeRules = boilerplate(seed + 6, 3, COMMON)
  families.push({
    name: 'office pages', kind: 'md', length: 'short',
    members: Array.from({ length: members }, (_, i) => {
      const city = CITIES[i % CITIES.length]
      const manager = PEOPLE[i % PEOPLE.length]
      const text = `# ${city} office\n\nThe ${city} office is at ${10 + i} Harbour Street. Call +44 20 7946 ${String(1000 + i * 37).slice(0, 4)} ` +
        `and ask for ${manager}, who manages the ${city} office.\n\n${officeRules}\n`
      return { name: `office-${city.toLowerCase()}.md`, title: `${city} office`, content: text, kind: 'md' as const, marker: city }
    }),
  })

  // 5. API endpoint pages (HTML, short, no menu): the resource and its fields differ.
  const auth = boilerplate(seed + 7, 3, COMMON)
  families.push({
    name: 'API endpoints', kind: 'html', length: 'short',
    members: Array.from({ length: members }, (_, i) => {
      const resource = RESOURCES[i % RESOURCES.length]
      const html = `<!doctype html><html><head><title>GET /v2/${resource}</title></head><body><h1>GET /v2/${resource}</h1>` +
        `<p>Lists the ${resource} of the account, newest first, ${20 + i} per page.</p><p>${auth}</p>` +
        `<p>Example: <code>curl https://api.example.com/v2/${resource}?page=2</code></p></body></html>`
      return { name: `api-${resource}.html`, title: `GET /v2/${resource}`, content: html, kind: 'html' as const, marker: resource }
    }),
  })

  // 6. Country travel policies (plain text, long): per diem figures and the country differ.
  const travel = boilerplate(seed + 8, 30, COMMON)
  families.push({
    name: 'travel policies', kind: 'txt', length: 'long',
    members: Array.from({ length: members }, (_, i) => {
      const country = COUNTRIES[i % COUNTRIES.length]
      const perDiem = 40 + ((i * 9) % 90)
      const text = `Travel policy for ${country}\n\nTravellers to ${country} receive a per diem of ${perDiem} EUR and may book hotels up to ` +
        `${perDiem * 3} EUR a night. Trips to ${country} need approval ${2 + (i % 5)} weeks ahead.\n\n${travel}\n\n` +
        `Questions about ${country} go to ${PEOPLE[(i * 7) % PEOPLE.length]}.`
      return { name: `travel-${country.toLowerCase()}.txt`, title: `travel-${country.toLowerCase()}`, content: text, kind: 'txt' as const, marker: country }
    }),
  })

  // 7. One-line notes that differ only in a name.
  families.push({
    name: 'one-line notes', kind: 'txt', length: 'short',
    members: Array.from({ length: members }, (_, i) => {
      const person = PEOPLE[i % PEOPLE.length]
      const topic = TOPICS[Math.floor(i / PEOPLE.length) % TOPICS.length]
      const text = `Contact ${person} for ${topic} questions.`
      return { name: `contact-${i + 1}.txt`, title: `contact-${i + 1}`, content: text, kind: 'txt' as const, marker: person.split(' ')[1] }
    }),
  })
  return families
}

/** The HTML of a crawled page as a print view: the same text, another layout (no menu or footer). */
export function printView(doc: TemplatedDoc): string {
  const main = /<main>([\s\S]*)<\/main>/.exec(doc.content)?.[1] ?? doc.content
  return `<!doctype html><html><head><title>${esc(doc.title)}</title></head><body class="print">${main}</body></html>`
}
