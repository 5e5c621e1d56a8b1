// @ts-check
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

/**
 * The shared folders of src/, lowest first: each may import only those before it. `time` (timeouts,
 * sleeps, jitter) imports nothing of the project; `store` is every Redis operation of a follow-up,
 * beside its Lua script; `runtime` is a role's life (the Role, its resources, its shutdown).
 */
const SHARED = [
  'time',
  'config',
  'redis',
  'telemetry',
  'agent-api',
  'dispatch',
  'store',
  'runtime',
];

/** The roles and the composition root: no shared folder imports them. */
const ROLES = ['consumer', 'poller', 'producer', 'http', 'webhooks', 'cli'];

/**
 * Forbids files matching `files` to import the folders `forbidden` of src/.
 */
function layer(files, forbidden) {
  return [
    {
      files,
      rules: {
        'no-restricted-imports': [
          'error',
          {
            patterns: forbidden.map((folder) => ({
              group: [`../${folder}/*`, `../../${folder}/*`, `../${folder}.js`],
              message: `this layer must not import src/${folder}`,
            })),
          },
        ],
      },
    },
  ];
}

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', '.data/**', 'coverage/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    rules: {
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-non-null-assertion': 'error',
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_' },
      ],
      'no-restricted-syntax': [
        'error',
        {
          selector: "MemberExpression[object.name='process'][property.name='env']",
          message: 'Read settings through src/config only.',
        },
      ],
    },
  },
  {
    // A source file past this length has grown two subjects: split it where they part (issue 11).
    files: ['src/**/*.ts'],
    rules: { 'max-lines': ['error', { max: 250 }] },
  },
  // Layering: roles never import each other, shared folders never import a role, and each shared
  // folder imports only the folders below it in SHARED (so no arrow runs back up and folders make
  // no cycle). The producer is the library that the HTTP intake and the CLI use, so those two may
  // import it. The simulator stands in for the agent API: it uses the folders up to agent-api and
  // nothing shared uses it.
  ...SHARED.flatMap((folder, i) =>
    layer([`src/${folder}/**`], [...SHARED.slice(i + 1), 'simulator', ...ROLES]),
  ),
  ...layer(['src/simulator/**'], [...SHARED.slice(SHARED.indexOf('agent-api') + 1), ...ROLES]),
  ...layer(['src/consumer/**'], ['poller', 'producer', 'http', 'cli']),
  ...layer(['src/poller/**'], ['consumer', 'producer', 'http', 'cli']),
  ...layer(['src/producer/**'], ['consumer', 'poller', 'http', 'cli']),
  ...layer(['src/http/**'], ['consumer', 'poller', 'cli']),
  // The webhook deliverer is a role of its own: it shares the runtime, never another role.
  ...layer(['src/webhooks/**'], ['consumer', 'poller', 'producer', 'http', 'cli']),
  {
    // The composition root and the config loader are the only readers of process.env; tests and
    // scripts set up child processes' environments.
    files: [
      'src/config/**',
      'src/cli.ts',
      'test/**',
      'bench/**',
      'examples/**',
      'vitest.config.ts',
    ],
    rules: { 'no-restricted-syntax': 'off' },
  },
  {
    files: ['test/**', 'bench/**'],
    rules: { '@typescript-eslint/no-non-null-assertion': 'off' },
  },
);
