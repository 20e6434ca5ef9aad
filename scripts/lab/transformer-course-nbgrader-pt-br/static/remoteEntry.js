/*
 * Transformers do zero — a ferramenta de validação do nbgrader em português.
 *
 * A extensão do nbgrader 0.9.6 para o JupyterLab escreve os textos direto na página ("Validate",
 * "Validation Results", "Success! Your notebook passes all the tests."...), sem o tradutor do
 * JupyterLab (ITranslator): nenhum pacote de idioma os alcança. Este plugin observa a página e troca,
 * só no botão de validação e nos diálogos, os textos exatos da lista abaixo pelos em português. Não
 * toca em mais nada (o código das células que o diálogo mostra fica como está).
 *
 * É uma extensão federada do JupyterLab escrita à mão, sem etapa de build: o contêiner
 * (_JUPYTERLAB[nome] com init e get) é o que o JupyterLab carrega de static/remoteEntry.js, e
 * "./extension" devolve o plugin. scripts/configure_lab.py a instala em
 * <ambiente>/share/jupyter/labextensions/.
 */
var _JUPYTERLAB;
(function () {
  'use strict';

  var TEXTS = {
    'Validate': 'Validar',
    'Validate Assignment': 'Validar a tarefa (roda os testes visíveis do notebook)',
    'Validating...': 'Validando...',
    'Saving...': 'Salvando...',
    'Validation Results': 'Resultado da validação',
    'Validation failed': 'A validação falhou',
    'Version Mismatch': 'Versões diferentes do nbgrader',
    'Cannot save notebook': 'Não foi possível salvar o notebook',
    'Success! Your notebook passes all the tests.':
      'Tudo certo! O seu notebook passa em todos os testes.',
    'The following cell failed:': 'Esta célula falhou:',
    'The following cell passed:': 'Esta célula passou:',
    'The source of the following cell has changed, but it should not have!':
      'O código desta célula mudou, e não devia ter mudado!',
    'There was an error running the validate command:': 'Houve um erro ao rodar a validação:'
  };
  var PATTERNS = [
    [
      /^The following (\S+) cell has changed to a (\S+) cell, but it should not have!$/,
      'Esta célula de tipo $1 virou uma célula de tipo $2, e não devia ter virado!'
    ],
    [/^Cannot validate: /, 'Não foi possível validar: '],
    [/^Cannot check version: /, 'Não foi possível conferir a versão: ']
  ];
  // Onde traduzir: o rótulo do botão de validação, o título e os parágrafos dos diálogos.
  var TARGETS =
    '.validate-button .jp-ToolbarButtonComponent-label, .jp-Dialog-header, ' +
    '#validation-message > div > p, .jp-Dialog-body';

  function translated(text) {
    if (Object.prototype.hasOwnProperty.call(TEXTS, text)) {
      return TEXTS[text];
    }
    for (var i = 0; i < PATTERNS.length; i++) {
      if (PATTERNS[i][0].test(text)) {
        return text.replace(PATTERNS[i][0], PATTERNS[i][1]);
      }
    }
    return null;
  }

  function translateElement(element) {
    // Só os nós de texto filhos diretos: o <pre> com o código de uma célula nunca é tocado.
    for (var i = 0; i < element.childNodes.length; i++) {
      var node = element.childNodes[i];
      if (node.nodeType === Node.TEXT_NODE) {
        var text = node.nodeValue.trim();
        var pt = text && translated(text);
        if (pt) {
          node.nodeValue = pt;
        }
      }
    }
  }

  function translateButtons(root) {
    // O botão (o elemento jp-button com a classe validate-button) leva a dica em "title" e o rótulo
    // em "aria-label", o que um leitor de tela lê.
    var buttons = root.querySelectorAll('.validate-button, .validate-button [title]');
    var attributes = ['title', 'aria-label'];
    for (var i = 0; i < buttons.length; i++) {
      for (var j = 0; j < attributes.length; j++) {
        var value = buttons[i].getAttribute(attributes[j]);
        var pt = value && translated(value);
        if (pt) {
          buttons[i].setAttribute(attributes[j], pt);
        }
      }
    }
  }

  function translateAll() {
    var elements = document.body.querySelectorAll(TARGETS);
    for (var i = 0; i < elements.length; i++) {
      translateElement(elements[i]);
    }
    translateButtons(document.body);
  }

  var plugin = {
    id: 'transformer-course-nbgrader-pt-br:plugin',
    description: 'A ferramenta de validação do nbgrader em português.',
    autoStart: true,
    activate: function () {
      var scheduled = false;
      var observer = new MutationObserver(function () {
        if (!scheduled) {
          scheduled = true;
          // Um microtask: várias mudanças de uma vez viram uma tradução só.
          Promise.resolve().then(function () {
            scheduled = false;
            translateAll();
          });
        }
      });
      observer.observe(document.body, {
        childList: true,
        subtree: true,
        characterData: true,
        attributes: true,
        attributeFilter: ['title', 'aria-label']
      });
      translateAll();
    }
  };

  var container = {
    init: function () {
      return Promise.resolve();
    },
    get: function (module) {
      if (module !== './extension') {
        return Promise.reject(new Error('módulo desconhecido: ' + module));
      }
      return Promise.resolve(function () {
        return { __esModule: true, default: [plugin] };
      });
    }
  };
  _JUPYTERLAB = typeof _JUPYTERLAB === 'undefined' ? {} : _JUPYTERLAB;
  _JUPYTERLAB['transformer-course-nbgrader-pt-br'] = container;
})();
