-- Access-controlled edition (issue 14): per-KB roles, invites, cached user profiles and the runtime system
-- config. A KB's state (active or frozen) is knowledge_bases.status; its visibility is knowledge_bases.visibility.

CREATE TABLE kb_members (
  kb_id       text NOT NULL REFERENCES knowledge_bases (kb_id) ON DELETE CASCADE,
  user_id     text NOT NULL,
  role        text NOT NULL CHECK (role IN ('owner', 'admin', 'editor', 'viewer')),
  granted_by  text,
  granted_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (kb_id, user_id)
);
-- Exactly one owner per KB at most (a frozen KB has none).
CREATE UNIQUE INDEX kb_members_one_owner ON kb_members (kb_id) WHERE role = 'owner';
CREATE INDEX kb_members_user ON kb_members (user_id);

-- E-mails are stored lower-cased. status: pending (listed), revoked, accepted, expired.
CREATE TABLE kb_invites (
  invite_id    uuid PRIMARY KEY,
  kb_id        text NOT NULL REFERENCES knowledge_bases (kb_id) ON DELETE CASCADE,
  email        text NOT NULL,
  role         text NOT NULL CHECK (role IN ('admin', 'editor', 'viewer')),
  granted_by   text NOT NULL,
  status       text NOT NULL DEFAULT 'pending',
  created_at   timestamptz NOT NULL DEFAULT now(),
  expires_at   timestamptz NOT NULL,
  accepted_by  text,
  accepted_at  timestamptz
);
CREATE UNIQUE INDEX kb_invites_one_pending ON kb_invites (kb_id, email) WHERE status = 'pending';
CREATE INDEX kb_invites_pending_email ON kb_invites (email) WHERE status = 'pending';

-- A display cache filled at invite, grant and login (spec 2.3), plus the per-user KB cap.
CREATE TABLE user_profiles (
  user_id             text PRIMARY KEY,
  email               text,
  display_name        text,
  preferred_username  text,
  max_kb_count        integer,
  created_at          timestamptz NOT NULL DEFAULT now(),
  updated_at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX user_profiles_email ON user_profiles (lower(email));

-- Runtime system config (spec 2.8): kb_authz_enabled, max_docs_count. One row per key.
CREATE TABLE system_config (
  key         text PRIMARY KEY,
  value       jsonb NOT NULL,
  updated_by  text,
  updated_at  timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX knowledge_bases_public ON knowledge_bases (kb_id) WHERE visibility = 'public';
